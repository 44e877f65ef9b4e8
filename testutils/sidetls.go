package testutils

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"testing"

	tlscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/tls/v3"
	xdscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/xds/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
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

	t              testing.TB
	server, client Cert
}

// NewSideTLS makes the two CAs and the certificates, in temporary
// directories of t.
func NewSideTLS(t testing.TB) *SideTLS {
	t.Helper()
	s := &SideTLS{t: t, PKI: NewPKI(t), Other: NewPKI(t)}
	s.server = s.PKI.Issue("side-service", CertOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	s.client = s.PKI.Issue("side-client", CertOptions{Client: true})
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

// Bootstrap is a bootstrap edit that defines SideRoots, SideWrongRoots
// and SideIdentity as file_watcher instances (beside any the bootstrap
// has) and marks its first server trusted_xds_server: gRFC A102 reads a
// GrpcService's channel credentials only from a trusted server (an
// untrusted one's get allowed_grpc_services' credentials instead).
func (s *SideTLS) Bootstrap(c *bootstrap.Config) {
	c.Servers[0].ServerFeatures = append(c.Servers[0].ServerFeatures, bootstrap.FeatureTrustedXDSServer)
	if c.CertificateProviders == nil {
		c.CertificateProviders = map[string]bootstrap.CertificateProvider{}
	}
	c.CertificateProviders[SideRoots] = s.fileWatcher(map[string]string{"ca_certificate_file": s.PKI.CAFile})
	c.CertificateProviders[SideWrongRoots] = s.fileWatcher(map[string]string{"ca_certificate_file": s.Other.CAFile})
	c.CertificateProviders[SideIdentity] = s.fileWatcher(map[string]string{"certificate_file": s.client.CertFile, "private_key_file": s.client.KeyFile})
}

func (s *SideTLS) fileWatcher(cfg map[string]string) bootstrap.CertificateProvider {
	b, err := json.Marshal(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	return bootstrap.CertificateProvider{PluginName: "file_watcher", Config: b}
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
