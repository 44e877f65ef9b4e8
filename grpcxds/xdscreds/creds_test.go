package xdscreds_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds/xdscreds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const method = "/goxds.test.Echo/Echo"

// echoDesc is a one-method service answering with its input.
var echoDesc = grpc.ServiceDesc{
	ServiceName: "goxds.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			return in, dec(in)
		},
	}},
}

// server is a gRPC server on 127.0.0.1 with creds, recording the SNI of
// each TLS handshake.
type server struct {
	addr string
	mu   sync.Mutex
	snis []string
}

func startServer(t *testing.T, cert tls.Certificate) *server {
	t.Helper()
	s := &server{}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			s.mu.Lock()
			s.snis = append(s.snis, hello.ServerName)
			s.mu.Unlock()
			return nil, nil
		}}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	srv.RegisterService(&echoDesc, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return s
}

func (s *server) lastSNI() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.snis) == 0 {
		return "<no handshake>"
	}
	return s.snis[len(s.snis)-1]
}

// securityOf decodes a cluster with the given UpstreamTlsContext, as the
// balancer gets it.
func securityOf(t *testing.T, u *tlsv3.UpstreamTlsContext) *resources.SecurityConfig {
	t.Helper()
	tc, err := anypb.New(u)
	if err != nil {
		t.Fatal(err)
	}
	c := testutils.Cluster("c", "")
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tc}}
	body, err := anypb.New(c)
	if err != nil {
		t.Fatal(err)
	}
	_, v, err := resources.ClusterType.DecodeTyped(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	return v.Security
}

func upstream(sni string, autoHost, autoSAN bool, sans ...*matcherv3.StringMatcher) *tlsv3.UpstreamTlsContext {
	return &tlsv3.UpstreamTlsContext{Sni: sni, AutoHostSni: autoHost, AutoSniSanValidation: autoSAN,
		CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
			ValidationContext: &tlsv3.CertificateValidationContext{
				CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "roots"},
				MatchSubjectAltNames:          sans,
			}}}}
}

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

// rpc dials addr through a manual resolver whose address carries hi and
// hostname, with xdscreds, and makes one RPC.
func rpc(t *testing.T, addr string, hi *xdscreds.HandshakeInfo, hostname string) error {
	t.Helper()
	creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	r := manual.NewBuilderWithScheme("test")
	r.InitialState(resolver.State{Addresses: []resolver.Address{xdscreds.SetHandshakeInfo(resolver.Address{Addr: addr}, hi, hostname)}})
	conn, err := grpc.NewClient("test:///x", grpc.WithResolvers(r), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return conn.Invoke(ctx, method, wrapperspb.String("hi"), new(wrapperspb.StringValue))
}

// TestClientHandshake runs RPCs through xdscreds to a TLS server whose
// certificate has DNS, wildcard DNS and SPIFFE URI SANs, with each kind of
// SAN matcher and each SNI setting.
func TestClientHandshake(t *testing.T) {
	p := testutils.NewPKI(t)
	good := p.Issue("server", testutils.CertOptions{DNSNames: []string{"svc.goxds.test", "*.wild.goxds.test"},
		URIs: []string{"spiffe://goxds.test/ns/a/sa/server"}})
	srv := startServer(t, good.TLS)
	other := testutils.NewPKI(t) // a CA the client does not trust
	stranger := startServer(t, other.Issue("server", testutils.CertOptions{DNSNames: []string{"svc.goxds.test"}}).TLS)
	cfg := &bootstrap.Config{CertificateProviders: map[string]bootstrap.CertificateProvider{
		"roots": {PluginName: "file_watcher", Config: json.RawMessage(`{"ca_certificate_file": "` + p.CAFile + `"}`)},
	}}
	m := func(p *matcherv3.StringMatcher, ignoreCase bool) *matcherv3.StringMatcher {
		p.IgnoreCase = ignoreCase
		return p
	}
	tests := []struct {
		name     string
		tls      *tlsv3.UpstreamTlsContext
		hostname string
		server   *server
		wantSNI  string
		wantErr  string
	}{
		{name: "no SAN matcher: the chain decides", tls: upstream("", false, false)},
		{name: "exact SPIFFE ID", tls: upstream("", false, false, exact("spiffe://goxds.test/ns/a/sa/server"))},
		{name: "one of several matchers", tls: upstream("", false, false, exact("spiffe://x"), exact("svc.goxds.test"))},
		{name: "prefix", tls: upstream("", false, false, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://goxds.test/ns/a/"}})},
		{name: "suffix ignore_case", tls: upstream("", false, false, m(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ".GOXDS.test"}}, true))},
		{name: "suffix case differs", tls: upstream("", false, false, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ".GOXDS.TEST"}}),
			wantErr: "do not match any of the accepted SANs"},
		{name: "contains", tls: upstream("", false, false, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "/sa/"}})},
		{name: "safe_regex", tls: upstream("", false, false, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{
			SafeRegex: &matcherv3.RegexMatcher{Regex: `spiffe://goxds\.test/ns/[a-z]+/sa/server`}}})},
		{name: "exact name under a wildcard DNS SAN", tls: upstream("", false, false, exact("api.wild.goxds.test"))},
		{name: "wildcard covers one label only", tls: upstream("", false, false, exact("a.b.wild.goxds.test")), wantErr: "do not match any of the accepted SANs"},
		{name: "no SAN matches", tls: upstream("", false, false, exact("spiffe://goxds.test/ns/a/sa/other")),
			wantErr: `server certificate: received SANs [DNS:svc.goxds.test DNS:*.wild.goxds.test URI:spiffe://goxds.test/ns/a/sa/server] do not match any of the accepted SANs [exact:"spiffe://goxds.test/ns/a/sa/other"]`},
		{name: "untrusted server", tls: upstream("", false, false), server: stranger, wantErr: "server certificate not trusted"},
		{name: "sni", tls: upstream("svc.goxds.test", false, false), wantSNI: "svc.goxds.test"},
		{name: "no sni", tls: upstream("", false, false), wantSNI: ""},
		{name: "auto_host_sni with a hostname", tls: upstream("svc.goxds.test", true, false), hostname: "host.goxds.test", wantSNI: "host.goxds.test"},
		{name: "auto_host_sni without a hostname: sni", tls: upstream("svc.goxds.test", true, false), wantSNI: "svc.goxds.test"},
		{name: "auto_sni_san_validation accepts", tls: upstream("svc.goxds.test", false, true), wantSNI: "svc.goxds.test"},
		{name: "auto_sni_san_validation with a wildcard", tls: upstream("x.wild.goxds.test", false, true), wantSNI: "x.wild.goxds.test"},
		{name: "auto_sni_san_validation rejects", tls: upstream("wrong.goxds.test", false, true),
			wantErr: `do not match the SNI "wrong.goxds.test" (auto_sni_san_validation)`},
		{name: "auto_sni_san_validation of the auto host", tls: upstream("svc.goxds.test", true, true), hostname: "wrong.goxds.test",
			wantErr: `do not match the SNI "wrong.goxds.test"`},
		{name: "auto_sni_san_validation wins over SAN matchers", tls: upstream("svc.goxds.test", false, true, exact("spiffe://x")),
			wantSNI: "svc.goxds.test"},
		{name: "auto_sni_san_validation without SNI: the matchers", tls: upstream("", false, true, exact("spiffe://x")),
			wantErr: "do not match any of the accepted SANs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hi, err := xdscreds.NewHandshakeInfo(cfg, securityOf(t, tt.tls))
			if err != nil {
				t.Fatal(err)
			}
			defer hi.Close()
			s := srv
			if tt.server != nil {
				s = tt.server
			}
			err = rpc(t, s.addr, hi, tt.hostname)
			// gRPC quotes the handshake error inside its own.
			text := strings.ReplaceAll(status.Convert(err).Message(), `\"`, `"`)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("RPC failed: %v", err)
			case tt.wantErr != "" && (status.Code(err) != codes.Unavailable || !strings.Contains(text, tt.wantErr)):
				t.Fatalf("RPC error = %v, want UNAVAILABLE containing %q", err, tt.wantErr)
			}
			if tt.wantErr == "" && s.lastSNI() != tt.wantSNI {
				t.Errorf("server saw SNI %q, want %q", s.lastSNI(), tt.wantSNI)
			}
		})
	}
}

// TestFallback: an address without HandshakeInfo uses the fallback
// credentials (plaintext to a plaintext server).
func TestFallback(t *testing.T) {
	srv := grpc.NewServer()
	srv.RegisterService(&echoDesc, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	if err := rpc(t, lis.Addr().String(), nil, ""); err != nil {
		t.Fatalf("RPC through the fallback credentials: %v", err)
	}
	if _, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{}); err == nil || !strings.Contains(err.Error(), "FallbackCreds is required") {
		t.Errorf("NewClientCredentials without fallback = %v, want an error", err)
	}
}

// TestNewHandshakeInfoErrors: an instance the bootstrap does not define, or
// no bootstrap at all, is an error naming the instance.
func TestNewHandshakeInfoErrors(t *testing.T) {
	sc := securityOf(t, upstream("", false, false))
	for name, cfg := range map[string]*bootstrap.Config{
		"no bootstrap":          nil,
		"instance not defined":  {},
		"plugin not registered": {CertificateProviders: map[string]bootstrap.CertificateProvider{"roots": {PluginName: "mesh_ca"}}},
	} {
		_, err := xdscreds.NewHandshakeInfo(cfg, sc)
		if err == nil || !strings.Contains(err.Error(), `"roots"`) {
			t.Errorf("%s: NewHandshakeInfo = %v, want an error naming \"roots\"", name, err)
		}
	}
}
