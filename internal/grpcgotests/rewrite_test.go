package main

import (
	"strings"
	"testing"
)

// The substitution on a file written as grpc-go's tests are: each name
// replaced, the arguments as written, a channel to a plain address left to
// grpc.NewClient's own resolvers, imports left unused dropped, a local
// variable of a package's name not taken for the package.
func TestRewriteFile(t *testing.T) {
	const in = `package xds_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/internal"
	"google.golang.org/grpc/internal/testutils/xds/e2e/setup"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/xds"
)

func (s) TestX(t *testing.T) {
	_, _, bc, r := setup.ManagementServerAndResolver(t)
	r2, _ := internal.NewXDSResolverWithConfigForTesting.(func([]byte) (resolver.Builder, error))(bc)
	creds, _ := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	cc, _ := grpc.NewClient("xds:///svc", grpc.WithTransportCredentials(creds), grpc.WithResolvers(r))
	cc2, _ := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	opts := []grpc.DialOption{grpc.WithResolvers(r2)}
	cc3, _ := grpc.NewClient("xds:///svc", opts...)
	srv, _ := xds.NewGRPCServer(xds.ServingModeCallback(func(_ net.Addr, _ xds.ServingModeChangeArgs) {}), xds.BootstrapContentsForTesting(bc))
	setup := 1
	_ = setup
	_, _, _, _, _ = cc, cc2, cc3, srv, r2
}
`
	out, counts, err := rewriteFile("x_test.go", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{
		`_, _, bc, r := goxdsManagementServerAndResolver(t)`,
		`r2, _ := goxdsNewXDSResolverWithConfigForTesting.(func([]byte) (resolver.Builder, error))(bc)`,
		`xdscreds "github.com/goxds/xds/grpcxds/xdscreds"`,
		`cc, _ := goxdsNewClient("xds:///svc", r, grpc.WithTransportCredentials(creds))`,
		`cc2, _ := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))`,
		// Resolvers in a slice are not seen: the harness never meets one
		// (every grpc-go xDS test passes grpc.WithResolvers inline).
		`cc3, _ := grpc.NewClient("xds:///svc", opts...)`,
		`srv, _ := goxdsNewGRPCServer(goxdsServingModeCallback(func(_ net.Addr, _ xds.ServingModeChangeArgs) {}), goxdsBootstrapContentsForTesting(bc))`,
		`setup := 1`,
		`"google.golang.org/grpc/xds"`, // still names ServingModeChangeArgs
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rewritten file lacks %q:\n%s", want, got)
		}
	}
	for _, gone := range []string{`"google.golang.org/grpc/internal"`, `"google.golang.org/grpc/internal/testutils/xds/e2e/setup"`, `credentials/xds"`} {
		if strings.Contains(got, gone) {
			t.Errorf("rewritten file still imports %s:\n%s", gone, got)
		}
	}
	if counts["grpc.NewClient(…, grpc.WithResolvers(r), …)"] != 1 || counts["xds.ServingModeCallback"] != 1 {
		t.Errorf("counts = %v", counts)
	}
}

// A grpc.WithResolvers of two resolvers has no one Builder to substitute:
// the rewrite says so rather than guess.
func TestRewriteFileTwoResolvers(t *testing.T) {
	const in = `package p

import "google.golang.org/grpc"

func f() { grpc.NewClient("xds:///a", grpc.WithResolvers(r1, r2)) }
`
	_, _, err := rewriteFile("y_test.go", []byte(in))
	if err == nil || !strings.Contains(err.Error(), "y_test.go:5") || !strings.Contains(err.Error(), "other than one resolver") {
		t.Fatalf("err = %v, want one naming y_test.go:5 and the two resolvers", err)
	}
}
