// The harness copies this file into grpc-go's test packages (test/xds and xds,
// both package xds_test) beside the substituted tests. Each function has the
// signature of the grpc-go name it replaces (see rewrite.go) and goes through
// goxds's public API only: grpcxds.Builder and grpcxds.NewClient for the
// channel, xdsserver for the server. It is in testdata so that goxds's own
// build never compiles it: it imports grpc-go's internal test packages.

package xds_test

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/xdsserver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/internal/testutils/xds/e2e"
	"google.golang.org/grpc/internal/xds/xdsclient"
	"google.golang.org/grpc/resolver"
	grpcgoxds "google.golang.org/grpc/xds"
)

// goxdsBuilder makes a goxds Builder from bootstrap contents, for targets
// "xds:///…" as the tests write them. Its client closes with the last
// channel (no linger), as grpc-go's does, so grpc-go's goroutine leak check
// after each test sees none of it.
func goxdsBuilder(contents []byte) (*grpcxds.Builder, error) {
	cfg, err := bootstrap.Parse(contents)
	if err != nil {
		return nil, err
	}
	return grpcxds.NewBuilder(grpcxds.Options{Scheme: "xds", Bootstrap: cfg, ClientLinger: -1})
}

// goxdsNewXDSResolverWithConfigForTesting replaces
// internal.NewXDSResolverWithConfigForTesting, with its type.
var goxdsNewXDSResolverWithConfigForTesting any = func(contents []byte) (resolver.Builder, error) {
	return goxdsBuilder(contents)
}

// goxdsManagementServerAndResolver replaces setup.ManagementServerAndResolver:
// the same management server and bootstrap, goxds's Builder.
func goxdsManagementServerAndResolver(t *testing.T) (*e2e.ManagementServer, string, []byte, resolver.Builder) {
	return goxdsSetup(t, e2e.DefaultBootstrapContents)
}

// goxdsManagementServerAndResolverWithSPIFFE replaces
// setup.ManagementServerAndResolverWithSPIFFE.
func goxdsManagementServerAndResolverWithSPIFFE(t *testing.T) (*e2e.ManagementServer, string, []byte, resolver.Builder) {
	return goxdsSetup(t, e2e.SPIFFEBootstrapContents)
}

func goxdsSetup(t *testing.T, contents func(*testing.T, string, string) []byte) (*e2e.ManagementServer, string, []byte, resolver.Builder) {
	t.Helper()
	srv := e2e.StartManagementServer(t, e2e.ManagementServerOptions{AllowResourceSubset: true})
	nodeID := uuid.New().String()
	bc := contents(t, nodeID, srv.Address)
	b, err := goxdsBuilder(bc)
	if err != nil {
		t.Fatalf("goxds Builder from the test's bootstrap: %v", err)
	}
	t.Cleanup(b.Close)
	return srv, nodeID, bc, b
}

// goxdsNewClient replaces grpc.NewClient(target, …, grpc.WithResolvers(r), …)
// for an "xds:///…" target: grpcxds.NewClient with r's Builder, which adds
// goxds's interceptors. Other targets (a server's address, which grpc-go
// gives to DNS whatever resolvers the channel has) and other resolvers (the
// test's own) keep grpc.NewClient.
func goxdsNewClient(target string, r resolver.Builder, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	b, ok := r.(*grpcxds.Builder)
	if !ok || !strings.HasPrefix(target, b.Scheme()+":") {
		return grpc.NewClient(target, append(opts, grpc.WithResolvers(r))...)
	}
	return grpcxds.NewClient(target, b, opts...)
}

// goxdsNewGRPCServer replaces xds.NewGRPCServer.
func goxdsNewGRPCServer(opts ...grpc.ServerOption) (*xdsserver.GRPCServer, error) {
	return xdsserver.NewGRPCServer(opts...)
}

// goxdsServingModeCallback replaces xds.ServingModeCallback: the test's
// callback, of grpc-go's type, is told xdsserver's changes.
func goxdsServingModeCallback(cb grpcgoxds.ServingModeCallbackFunc) grpc.ServerOption {
	return xdsserver.ServingModeCallback(func(addr net.Addr, args xdsserver.ServingModeChangeArgs) {
		mode := connectivity.ServingModeStarting
		switch args.Mode {
		case xdsserver.ServingModeServing:
			mode = connectivity.ServingModeServing
		case xdsserver.ServingModeNotServing:
			mode = connectivity.ServingModeNotServing
		}
		cb(addr, grpcgoxds.ServingModeChangeArgs{Mode: mode, Err: args.Err})
	})
}

// goxdsBootstrapContentsForTesting replaces xds.BootstrapContentsForTesting.
func goxdsBootstrapContentsForTesting(contents []byte) grpc.ServerOption {
	cfg, err := bootstrap.Parse(contents)
	if err != nil {
		// grpc-go's option has no error either; the test cannot go on.
		panic(fmt.Sprintf("goxds refuses the test's bootstrap: %v", err))
	}
	return xdsserver.BootstrapConfig(cfg)
}

// goxdsClientPoolForTesting replaces xds.ClientPoolForTesting: the server gets
// a goxds client of the pool's bootstrap.
func goxdsClientPoolForTesting(pool *xdsclient.Pool) grpc.ServerOption {
	contents, err := pool.BootstrapConfigForTesting().MarshalJSON()
	if err != nil {
		panic(fmt.Sprintf("the pool's bootstrap as JSON: %v", err))
	}
	return goxdsBootstrapContentsForTesting(contents)
}
