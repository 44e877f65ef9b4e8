package bootstrap

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/google"
	"google.golang.org/grpc/credentials/oauth"
	"google.golang.org/grpc/credentials/tls/certprovider"
	"google.golang.org/grpc/credentials/tls/certprovider/pemfile"
)

// googleScope is the OAuth scope Google's xDS servers want.
const googleScope = "https://www.googleapis.com/auth/cloud-platform"

// errNoGoogleCredentials wraps the failure to find application default
// credentials.
var errNoGoogleCredentials = errors.New("no Google application default credentials")

// googleDefaultCredentials finds the application default credentials.
// grpc-go's google.NewDefaultCredentials only logs when there are none and
// lets the calls fail at the server; looking them up first turns that into
// an error that says what is missing.
func googleDefaultCredentials(ctx context.Context) (credentials.TransportCredentials, credentials.PerRPCCredentials, error) {
	rpc, err := oauth.NewApplicationDefault(ctx, googleScope)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNoGoogleCredentials, err)
	}
	b := google.NewDefaultCredentialsWithOptions(google.DefaultCredentialsOptions{PerRPCCreds: rpc})
	return b.TransportCredentials(), b.PerRPCCredentials(), nil
}

// refreshingCredentials returns TLS credentials whose roots and client
// certificate come from a pemfile provider watching t's files: each
// handshake uses what the files held at the provider's last read.
func (t TLSCreds) refreshingCredentials() (credentials.TransportCredentials, func(), error) {
	p, err := pemfile.NewProvider(pemfile.Options{
		CertFile:        t.CertificateFile,
		KeyFile:         t.PrivateKeyFile,
		RootFile:        t.CACertificateFile,
		RefreshDuration: t.RefreshInterval, // zero: pemfile's default, ten minutes
	})
	if err != nil {
		return nil, nil, err
	}
	return &providerTLS{provider: p}, p.Close, nil
}

// providerTLS is client-side TLS whose key material a certprovider.Provider
// supplies at each handshake. Empty roots mean the system's.
type providerTLS struct {
	provider certprovider.Provider
}

func (c *providerTLS) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	km, err := c.provider.KeyMaterial(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("tls channel credentials: no certificates from the files yet: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: km.Roots, Certificates: km.Certs}
	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, raw)
}

func (c *providerTLS) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, fmt.Errorf("tls channel credentials are for clients only")
}

func (c *providerTLS) Info() credentials.ProtocolInfo {
	return credentials.NewTLS(nil).Info()
}

func (c *providerTLS) Clone() credentials.TransportCredentials {
	return &providerTLS{provider: c.provider}
}

// OverrideServerName is deprecated in grpc-go and unused by goxds.
func (c *providerTLS) OverrideServerName(string) error { return nil }
