package testutils

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	accesstokenv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/call_credentials/access_token/v3"
	tlscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/tls/v3"
	xdscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/xds/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
)

// The bootstrap's certificate provider instances a SideTLS defines.
const (
	// SideRoots trusts the CA that issued the side service's certificate.
	SideRoots = "side-roots"
	// SideWrongRoots trusts another CA only: a handshake with the side
	// service fails verifying its certificate.
	SideWrongRoots = "side-wrong-roots"
	// SideIdentity is the client certificate the side service accepts.
	SideIdentity = "side-id"
	// SideToken is the AccessTokenCredentials token the filters of
	// SideTLSCase carry: sent only on a channel with privacy and
	// integrity (gRFC A102), so on these TLS side channels.
	SideToken = "side-token"
)

// SideTLS is what a test of gRFC A102's TlsCredentials on a side channel
// (an ext_authz or ext_proc GrpcService) needs: a mutual-TLS service, the
// bootstrap certificate providers that reach it, and the plugins that name
// them.
//
// The service requires and verifies a client certificate its CA issued
// (tls.RequireAndVerifyClientCert), so a test that gets through it shows
// the side channel used TLS with the bootstrap's identity: a plaintext
// dial, or TLS without the SideIdentity certificate, fails the handshake
// and never reaches the service's handler.
type SideTLS struct {
	// PKI issued the service's certificate (IP SAN 127.0.0.1, for a
	// passthrough target of its address) and the client's.
	PKI *PKI
	// Other is a CA that issued neither.
	Other *PKI

	server, client Cert
	// providers are the instances Providers defines.
	providers map[string]bootstrap.CertificateProvider
}

// NewSideTLS makes the two CAs and the certificates, in temporary
// directories of t.
func NewSideTLS(t testing.TB) *SideTLS {
	t.Helper()
	s := &SideTLS{PKI: NewPKI(t), Other: NewPKI(t)}
	s.server = s.PKI.Issue("side-service", CertOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	s.client = s.PKI.Issue("side-client", CertOptions{Client: true})
	fileWatcher := func(cfg map[string]string) bootstrap.CertificateProvider {
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return bootstrap.CertificateProvider{PluginName: "file_watcher", Config: b}
	}
	s.providers = map[string]bootstrap.CertificateProvider{
		SideRoots:      fileWatcher(map[string]string{"ca_certificate_file": s.PKI.CAFile}),
		SideWrongRoots: fileWatcher(map[string]string{"ca_certificate_file": s.Other.CAFile}),
		SideIdentity:   fileWatcher(map[string]string{"certificate_file": s.client.CertFile, "private_key_file": s.client.KeyFile}),
	}
	return s
}

// ServerOption makes a gRPC server (StartAuthzServer's, StartProcServer's)
// the mutual-TLS service.
func (s *SideTLS) ServerOption() grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(&tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{s.server.TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    s.PKI.Roots,
	}))
}

// Providers is a bootstrap edit that defines SideRoots, SideWrongRoots
// and SideIdentity as file_watcher instances, beside any the bootstrap
// has.
func (s *SideTLS) Providers(c *bootstrap.Config) {
	if c.CertificateProviders == nil {
		c.CertificateProviders = map[string]bootstrap.CertificateProvider{}
	}
	maps.Copy(c.CertificateProviders, s.providers)
}

// Creds is a channel_credentials_plugin entry: TlsCredentials whose roots
// are the instance roots (SideRoots or SideWrongRoots) and whose identity
// is SideIdentity.
func (s *SideTLS) Creds(roots string) *anypb.Any {
	return MarshalAny(&tlscredsv3.TlsCredentials{
		RootCertificateProvider:     &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: roots},
		IdentityCertificateProvider: &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: SideIdentity},
	})
}

// XdsCreds is XdsCredentials falling back to Creds(roots): a side channel
// has no xDS security configuration of its own, so it always uses the
// fallback (gRFC A102).
func (s *SideTLS) XdsCreds(roots string) *anypb.Any {
	return MarshalAny(&xdscredsv3.XdsCredentials{FallbackCredentials: s.Creds(roots)})
}

// SideTLSCase is one way a test configures a side channel's credentials,
// and what must follow.
type SideTLSCase struct {
	// Side is the service's PKI.
	Side *SideTLS
	// Name names the subtest.
	Name string
	// Plugin is the GrpcService's channel_credentials_plugin entry, used
	// as given when the management server is trusted.
	Plugin *anypb.Any
	// Untrusted: the management server is not trusted_xds_server, so the
	// side channel has the credentials of the bootstrap's
	// allowed_grpc_services entry for the service (gRFC A102): gRFC A65's
	// "tls", with the client certificate and roots that trust the service
	// when the case is Reached. The filter's own credentials (Plugin, which
	// would give the other outcome) and access token are not used.
	Untrusted bool
	allowedCA string // the roots of the allowed_grpc_services entry
	// FailureModeAllow is the filter's failure_mode_allow.
	FailureModeAllow bool
	// Reached: the handshake succeeds and the service answers; otherwise
	// it never hears of the request, and the filter's failure mode
	// decides.
	Reached bool
}

// Cases are the cases every user of side channels tests: from a trusted
// server, TlsCredentials, XdsCredentials falling back to them, and roots
// that do not trust the service under failure_mode_allow false and true;
// from an untrusted one, allowed_grpc_services' "tls" credentials with
// roots that trust the service and with roots that do not.
func (s *SideTLS) Cases() []SideTLSCase {
	return []SideTLSCase{
		{Side: s, Name: "tls", Plugin: s.Creds(SideRoots), Reached: true},
		{Side: s, Name: "xds fallback tls", Plugin: s.XdsCreds(SideRoots), Reached: true},
		{Side: s, Name: "wrong roots", Plugin: s.Creds(SideWrongRoots)},
		{Side: s, Name: "wrong roots failure_mode_allow", Plugin: s.Creds(SideWrongRoots), FailureModeAllow: true},
		{Side: s, Name: "allowed tls", Plugin: s.Creds(SideWrongRoots), Untrusted: true, allowedCA: s.PKI.CAFile, Reached: true},
		{Side: s, Name: "allowed wrong roots", Plugin: s.Creds(SideRoots), Untrusted: true, allowedCA: s.Other.CAFile},
	}
}

// Bootstrap is the bootstrap edit of the case, for the service at target:
// the certificate provider instances (Providers), and either the first
// server marked trusted_xds_server (gRFC A102 reads a GrpcService's
// credentials only from a trusted server) or, for an Untrusted case,
// target's allowed_grpc_services entry.
func (c SideTLSCase) Bootstrap(target string) func(*bootstrap.Config) {
	return func(b *bootstrap.Config) {
		c.Side.Providers(b)
		if c.Untrusted {
			if b.AllowedGRPCServices == nil {
				b.AllowedGRPCServices = map[string]bootstrap.AllowedGRPCService{}
			}
			b.AllowedGRPCServices[target] = bootstrap.AllowedGRPCService{ChannelCreds: []bootstrap.ChannelCreds{{
				Type: bootstrap.CredsTLS,
				TLS:  &bootstrap.TLSCreds{CACertificateFile: c.allowedCA, CertificateFile: c.Side.client.CertFile, PrivateKeyFile: c.Side.client.KeyFile},
			}}}
			return
		}
		if len(b.Servers) > 0 {
			b.Servers[0].ServerFeatures = append(b.Servers[0].ServerFeatures, bootstrap.FeatureTrustedXDSServer)
		}
	}
}

// RunSideAuthz runs f on each case of a new SideTLS's Cases, a subtest
// of t each, with an authorization service of its own (so that its
// Checks are the subtest's) answering with handler over mutual TLS.
func RunSideAuthz(t *testing.T, handler func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error), f func(*testing.T, SideTLSCase, *AuthzServer)) {
	t.Helper()
	s := NewSideTLS(t)
	for _, c := range s.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			a, err := StartAuthzServer(handler, s.ServerOption())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(a.Stop)
			f(t, c, a)
		})
	}
}

// RunSideProc runs f on each case of a new SideTLS's Cases, a subtest of
// t each, with a processor of its own (so that its Metadata are the
// subtest's streams) answering as answer says over mutual TLS.
func RunSideProc(t *testing.T, answer func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error), f func(*testing.T, SideTLSCase, *ProcServer)) {
	t.Helper()
	s := NewSideTLS(t)
	for _, c := range s.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			p, _ := StartProcCounting(t, answer, s.ServerOption())
			f(t, c, p)
		})
	}
}

// ExtAuthz edits an ExtAuthzFilter for the case: its credentials (and
// SideToken), its failure_mode_allow (with the header that tells the
// handler), and status_on_error 503, so that a failed check is told from
// a denial.
func (c SideTLSCase) ExtAuthz(m *extauthzv3.ExtAuthz) {
	c.credentials(m.GetGrpcService())
	m.FailureModeAllow, m.FailureModeAllowHeaderAdd = c.FailureModeAllow, true
	m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
}

// ExtProc edits an ExtProcFilter for the case: its credentials (and
// SideToken) and its failure_mode_allow.
func (c SideTLSCase) ExtProc(m *extprocv3.ExternalProcessor) {
	c.credentials(m.GetGrpcService())
	m.FailureModeAllow = c.FailureModeAllow
}

// credentials gives gs the case's channel credentials and SideToken.
func (c SideTLSCase) credentials(gs *corev3.GrpcService) {
	gg := gs.GetGoogleGrpc()
	gg.ChannelCredentialsPlugin = []*anypb.Any{c.Plugin}
	gg.CallCredentialsPlugin = []*anypb.Any{MarshalAny(&accesstokenv3.AccessTokenCredentials{Token: SideToken})}
}

// WantChecks checks that a received reached checks if the case is
// Reached, and none otherwise; each carries SideToken from a trusted
// server (the side channel was TLS, which gRFC A102's access tokens
// need), none from an untrusted one.
func (c SideTLSCase) WantChecks(t testing.TB, a *AuthzServer, reached int) {
	t.Helper()
	checks := a.Checks()
	if !c.Reached {
		reached = 0
	}
	if len(checks) != reached {
		t.Fatalf("%d checks reached the service, want %d", len(checks), reached)
	}
	for _, ch := range checks {
		c.wantToken(t, ch.Metadata)
	}
}

// wantToken checks the authorization a side call carried: SideToken
// from a trusted server, none from an untrusted one.
func (c SideTLSCase) wantToken(t testing.TB, md metadata.MD) {
	t.Helper()
	want := []string{"Bearer " + SideToken}
	if c.Untrusted {
		want = nil
	}
	if got := md.Get("authorization"); !slices.Equal(got, want) {
		t.Fatalf("the side call carried authorization %q, want %q", got, want)
	}
}

// WantProc checks what an RPC through an ext_proc filter of the case
// gave, and p the processor saw: reached, no error, got is processed and
// one stream opened (with SideToken from a trusted server); under
// failure_mode_allow, no error, got is unprocessed and no stream opened;
// otherwise INTERNAL (gRFC A93's status for a processor that failed)
// naming the certificate the handshake refused, and no stream.
func (c SideTLSCase) WantProc(t testing.TB, got string, err error, p *ProcServer, processed, unprocessed string) {
	t.Helper()
	opened := p.Metadata()
	for _, md := range opened {
		c.wantToken(t, md)
	}
	streams := len(opened)
	switch {
	case c.Reached:
		if err != nil || got != processed || streams != 1 {
			t.Fatalf("RPC: %q, %v, %d streams; want %q over one stream", got, err, streams, processed)
		}
	case c.FailureModeAllow:
		if err != nil || got != unprocessed || streams != 0 {
			t.Fatalf("failure_mode_allow: %q, %v, %d streams; want %q unprocessed, no stream", got, err, streams, unprocessed)
		}
	default:
		if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "certificate") || streams != 0 {
			t.Fatalf("RPC: %q, %v, %d streams; want INTERNAL naming the certificate, no stream", got, err, streams)
		}
	}
}
