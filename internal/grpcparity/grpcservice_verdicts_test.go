package grpcparity

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	accesstokenv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/call_credentials/access_token/v3"
	insecurev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/insecure/v3"
	localv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/local/v3"
	tlscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/tls/v3"
	xdscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/xds/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// grpc-go v1.85 parses a GrpcService (gRFC A102) only in its ext_proc
// filter, which it registers only with this set when it starts.
var grpcServiceEnv = []string{"GRPC_EXPERIMENTAL_XDS_EXT_PROC_ON_CLIENT=true"}

// allowedTarget is the one target of the bootstrap's allowed_grpc_services.
const allowedTarget = "dns:///allowed.example:443"

// grpcServiceBootstrap is a bootstrap naming the management server at
// addr, marked trusted_xds_server if trusted, allowing allowedTarget
// with insecure credentials, and defining the certificate provider
// instance "roots" (whose file is never read: no case builds it).
func grpcServiceBootstrap(t *testing.T, addr string, trusted bool) []byte {
	t.Helper()
	var features []string
	if trusted {
		features = []string{bootstrap.FeatureTrustedXDSServer}
	}
	var m map[string]any
	if err := json.Unmarshal(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: addr, NodeID: "parity", ServerFeatures: features}), &m); err != nil {
		t.Fatal(err)
	}
	m["allowed_grpc_services"] = map[string]any{allowedTarget: map[string]any{"channel_creds": []any{map[string]any{"type": "insecure"}}}}
	m["certificate_providers"] = map[string]any{"roots": map[string]any{"plugin_name": "file_watcher", "config": map[string]any{"ca_certificate_file": "/nonexistent/ca.pem"}}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// procWith is an ExternalProcessor whose GrpcService calls allowedTarget
// with insecure credentials, changed by change.
func procWith(change func(gs *corev3.GrpcService)) *extprocv3.ExternalProcessor {
	gs := &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{
		TargetUri:                allowedTarget,
		ChannelCredentialsPlugin: []*anypb.Any{toAny(&insecurev3.InsecureCredentials{})},
	}}}
	if change != nil {
		change(gs)
	}
	return &extprocv3.ExternalProcessor{GrpcService: gs, ProcessingMode: &extprocv3.ProcessingMode{}}
}

func metadataOf(hs ...*corev3.HeaderValue) func(gs *corev3.GrpcService) {
	return func(gs *corev3.GrpcService) { gs.InitialMetadata = hs }
}

func channelCreds(plugins ...*anypb.Any) func(gs *corev3.GrpcService) {
	return func(gs *corev3.GrpcService) { gs.GetGoogleGrpc().ChannelCredentialsPlugin = plugins }
}

// TestGrpcServiceVerdicts compares goxds's verdicts on a GrpcService
// (gRFC A102), from a server marked trusted_xds_server and from one that
// is not, with grpc-go's on the same message in an ext_proc filter of a
// client Listener, in a child process of this test binary with grpc-go's
// ext_proc switch on (it reads it once, at init).
func TestGrpcServiceVerdicts(t *testing.T) {
	if os.Getenv("GRPC_EXPERIMENTAL_XDS_EXT_PROC_ON_CLIENT") != "true" {
		ctx, cancel := context.WithTimeout(context.Background(), 8*verdictTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGrpcServiceVerdicts$", "-test.v")
		cmd.Env = append(os.Environ(), grpcServiceEnv...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("with %v: %v\n%s", grpcServiceEnv, err, out)
		}
		t.Logf("with %v:\n%s", grpcServiceEnv, out)
		return
	}
	long := strings.Repeat("v", 16384)
	tests := []struct {
		name string
		gs   func(gs *corev3.GrpcService)
		// differs explains a verdict that is knowingly not grpc-go's, from
		// a trusted (differsTrusted) or an untrusted server.
		differsTrusted, differsUntrusted string
	}{
		{name: "allowed target"},
		{name: "target not allowed", gs: func(gs *corev3.GrpcService) { gs.GetGoogleGrpc().TargetUri = "dns:///other.example:443" }},
		{name: "empty target", gs: func(gs *corev3.GrpcService) { gs.GetGoogleGrpc().TargetUri = "" }},
		{name: "envoy_grpc", gs: func(gs *corev3.GrpcService) {
			gs.TargetSpecifier = &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "c"}}
		}},
		{name: "zero timeout", gs: func(gs *corev3.GrpcService) { gs.Timeout = durationpb.New(0) }},
		{name: "negative timeout", gs: func(gs *corev3.GrpcService) { gs.Timeout = &durationpb.Duration{Seconds: -1} }},
		{name: "metadata value", gs: metadataOf(&corev3.HeaderValue{Key: "x-tenant", Value: "blue"})},
		{name: "metadata raw_value", gs: metadataOf(&corev3.HeaderValue{Key: "x-tenant", RawValue: []byte("blue")})},
		{name: "metadata -bin raw_value", gs: metadataOf(&corev3.HeaderValue{Key: "x-id-bin", RawValue: []byte{0, 0xff}})},
		{name: "metadata value of 16384 bytes", gs: metadataOf(&corev3.HeaderValue{Key: "x-long", RawValue: []byte(long)})},
		{name: "metadata value of 16385 bytes", gs: metadataOf(&corev3.HeaderValue{Key: "x-long", RawValue: []byte(long + "v")})},
		{name: "metadata raw_value not printable", gs: metadataOf(&corev3.HeaderValue{Key: "x-tenant", Value: "ok", RawValue: []byte("a\nb")})},
		{name: "metadata value not printable", gs: metadataOf(&corev3.HeaderValue{Key: "x-tenant", Value: "a\tb"})},
		{name: "metadata empty name", gs: metadataOf(&corev3.HeaderValue{Value: "v"})},
		{name: "metadata upper case name", gs: metadataOf(&corev3.HeaderValue{Key: "X-Tenant", Value: "v"})},
		{name: "metadata host", gs: metadataOf(&corev3.HeaderValue{Key: "host", Value: "v"})},
		{name: "metadata pseudo-header", gs: metadataOf(&corev3.HeaderValue{Key: ":authority", Value: "v"})},
		{name: "metadata grpc- name", gs: metadataOf(&corev3.HeaderValue{Key: "grpc-timeout", Value: "1S"})},
		{name: "no supported channel credentials", gs: channelCreds(toAny(&durationpb.Duration{}))},
		{name: "unknown channel credentials skipped", gs: channelCreds(toAny(&durationpb.Duration{}), toAny(&insecurev3.InsecureCredentials{}))},
		{name: "xds credentials, insecure fallback", gs: channelCreds(toAny(&xdscredsv3.XdsCredentials{FallbackCredentials: toAny(&insecurev3.InsecureCredentials{})}))},
		{name: "tls credentials of an undefined instance", gs: channelCreds(toAny(&tlscredsv3.TlsCredentials{
			RootCertificateProvider: &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: "nope"}}))},
		{name: "tls credentials without roots", gs: channelCreds(toAny(&tlscredsv3.TlsCredentials{}))},
		{name: "local credentials", gs: channelCreds(toAny(&localv3.LocalCredentials{}))},
		{name: "access token", gs: func(gs *corev3.GrpcService) {
			gs.GetGoogleGrpc().CallCredentialsPlugin = []*anypb.Any{toAny(&accesstokenv3.AccessTokenCredentials{Token: "t"})}
		}},
		{name: "empty access token", gs: func(gs *corev3.GrpcService) {
			gs.GetGoogleGrpc().CallCredentialsPlugin = []*anypb.Any{toAny(&accesstokenv3.AccessTokenCredentials{})}
		}},
	}
	// Not compared: TlsCredentials of a defined instance, valid to both,
	// which grpc-go builds as it parses, starting a certificate provider
	// whose goroutine outlives its client (goleak); resources
	// TestGrpcServiceTLSAndXdsCredentials has goxds's side.
	for _, tt := range tests {
		for _, trusted := range []bool{true, false} {
			name := tt.name + "/untrusted"
			differs := tt.differsUntrusted
			if trusted {
				name, differs = tt.name+"/trusted", tt.differsTrusted
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				m := procWith(tt.gs)
				ctx, s := grpcGoClientWith(t, func(addr string) []byte { return grpcServiceBootstrap(t, addr, trusted) })
				grpcNACK := exchange(ctx, t, s, resources.ListenerTypeURL, listenerName, listener(filter("proc", toAny(m), false), router()))
				cfg, err := bootstrap.Parse(grpcServiceBootstrap(t, s.Address(), trusted))
				if err != nil {
					t.Fatal(err)
				}
				_, goxds := resources.NewExtProcConfig(&resources.DecodeContext{Bootstrap: cfg, Server: &cfg.Servers[0]}, m)
				t.Logf("goxds %v; grpc-go %q", goxds, grpcNACK)
				if differs != "" {
					if (goxds != nil) == (grpcNACK != "") {
						t.Errorf("known difference gone: goxds %v, grpc-go %q; drop the note: %s", goxds, grpcNACK, differs)
					}
					return
				}
				compare(t, goxds, grpcNACK)
			})
		}
	}
}

// grpcGoClientWith is grpcGoClient with the bootstrap bootstrapFor gives
// for the fake server's address.
func grpcGoClientWith(t *testing.T, bootstrapFor func(addr string) []byte) (context.Context, *testutils.FakeServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), verdictTimeout)
	t.Cleanup(cancel)
	s, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	b, err := xds.NewXDSResolverWithConfigForTesting(bootstrapFor(s.Address()))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///"+listenerName, grpc.WithResolvers(b), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.Connect()
	return ctx, s
}
