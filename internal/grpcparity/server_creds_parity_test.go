package grpcparity

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcxdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds/xdscreds"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// parityGreeter is a hand-made service whose one method answers with an
// empty string.
var parityGreeter = grpc.ServiceDesc{
	ServiceName: "parity.Greeter",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "SayHello", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		return new(wrapperspb.StringValue), dec(new(wrapperspb.StringValue))
	}}},
}

// TestServerCredentialsParity: grpc-go's xds.NewGRPCServer and goxds's
// xdsserver.NewGRPCServer, given the same Listener and the same kind of
// credentials, serve the same clients: with insecure credentials the
// Listener's TLS is ignored (plaintext is served), with xDS credentials a
// chain without TLS is the fallback's and one with TLS is TLS only.
func TestServerCredentialsParity(t *testing.T) {
	pki := testutils.NewPKI(t)
	cert := pki.Issue("server", testutils.CertOptions{DNSNames: []string{"server.test"}})
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Stop()
	var b map[string]any
	if err := json.Unmarshal(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: "parity-creds"}), &b); err != nil {
		t.Fatal(err)
	}
	b["server_listener_resource_name_template"] = serverTemplate
	b["certificate_providers"] = map[string]any{
		"id": map[string]any{"plugin_name": "file_watcher", "config": map[string]any{"certificate_file": cert.CertFile, "private_key_file": cert.KeyFile}},
	}
	contents, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := bootstrap.Parse(contents)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name           string
		xds, chainTLS  bool
		plain, withTLS bool // which clients are served
	}{
		{name: "insecure credentials, TLS chain", chainTLS: true, plain: true},
		{name: "xDS credentials, chain without TLS", xds: true, plain: true},
		{name: "xDS credentials, TLS chain", xds: true, chainTLS: true, withTLS: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), verdictTimeout)
			defer cancel()
			// grpc-go's server and goxds's, each with the credentials of
			// its own package for the case.
			var gCreds, xCreds credentials.TransportCredentials = insecure.NewCredentials(), insecure.NewCredentials()
			if tt.xds {
				if gCreds, err = grpcxdscreds.NewServerCredentials(grpcxdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()}); err != nil {
					t.Fatal(err)
				}
				if xCreds, err = xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()}); err != nil {
					t.Fatal(err)
				}
			}
			serving := make(chan string, 4)
			gsrv, err := xds.NewGRPCServer(grpc.Creds(gCreds), xds.BootstrapContentsForTesting(contents),
				xds.ServingModeCallback(func(_ net.Addr, a xds.ServingModeChangeArgs) {
					if a.Mode == connectivity.ServingModeServing {
						serving <- "grpc-go"
					}
				}))
			if err != nil {
				t.Fatal(err)
			}
			xsrv, err := xdsserver.NewGRPCServer(grpc.Creds(xCreds), xdsserver.BootstrapConfig(cfg),
				xdsserver.ServingModeCallback(func(_ net.Addr, a xdsserver.ServingModeChangeArgs) {
					if a.Mode == xdsserver.ServingModeServing {
						serving <- "goxds"
					}
				}))
			if err != nil {
				t.Fatal(err)
			}
			var listeners []*listenerv3.Listener
			addrs := map[string]string{}
			for name, srv := range map[string]interface {
				RegisterService(*grpc.ServiceDesc, any)
				Serve(net.Listener) error
				Stop()
			}{"grpc-go": gsrv, "goxds": xsrv} {
				srv.RegisterService(&parityGreeter, struct{}{})
				raw, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan struct{})
				go func() { srv.Serve(raw); close(done) }()
				defer func() { srv.Stop(); <-done }()
				addrs[name] = raw.Addr().String()
				listeners = append(listeners, credsListener(raw.Addr().(*net.TCPAddr), tt.chainTLS))
			}
			if err := ms.Update(ctx, "parity-creds", testutils.Resources{Listeners: listeners}); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				select {
				case <-serving:
				case <-ctx.Done():
					t.Fatal("the servers did not both report SERVING")
				}
			}
			for _, name := range []string{"grpc-go", "goxds"} {
				plain := served(ctx, t, addrs[name], insecure.NewCredentials())
				withTLS := served(ctx, t, addrs[name], credentials.NewTLS(&tls.Config{RootCAs: pki.Roots, ServerName: "server.test"}))
				t.Logf("%s: plaintext client served %v, TLS client served %v", name, plain, withTLS)
				if plain != tt.plain || withTLS != tt.withTLS {
					t.Errorf("%s: plaintext client served %v, TLS client %v; want %v, %v", name, plain, withTLS, tt.plain, tt.withTLS)
				}
			}
		})
	}
}

// credsListener is the Listener for a server on addr: one filter chain,
// over TLS with the "id" instance's certificate if withTLS.
func credsListener(addr *net.TCPAddr, withTLS bool) *listenerv3.Listener {
	fc := serverChain(nil, nil)
	if withTLS {
		fc = tlsChain(fc)
	}
	return &listenerv3.Listener{
		Name: "grpc/server?xds.resource.listening_address=" + addr.String(),
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(addr.Port)},
		}}},
		FilterChains: []*listenerv3.FilterChain{fc},
	}
}

func tlsChain(fc *listenerv3.FilterChain) *listenerv3.FilterChain {
	return withTLS(fc, &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateProviderInstance: providerInstance("id")}})
}

// served reports whether a client with creds gets an answer from addr: an
// RPC that is not wait-for-ready fails as soon as the handshake does.
func served(ctx context.Context, t *testing.T, addr string, creds credentials.TransportCredentials) bool {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return conn.Invoke(ctx, "/parity.Greeter/SayHello", wrapperspb.String("hi"), new(wrapperspb.StringValue)) == nil
}
