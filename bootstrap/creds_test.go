package bootstrap_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goxds/xds/bootstrap"
)

// pki is a throw-away CA with a server and a client certificate, written as
// PEM files into a test's temporary directory.
type pki struct {
	caFile, certFile, keyFile string          // client side files
	serverCert                tls.Certificate // for the test server
	roots                     *x509.CertPool  // trusts the CA
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	caKey, caDER := makeCert(t, nil, nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "goxds test ca"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	})
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, srvDER := makeCert(t, ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	cliKey, cliDER := makeCert(t, ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "goxds client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	p := &pki{
		caFile:     writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER),
		certFile:   writePEM(t, dir, "client.pem", "CERTIFICATE", cliDER),
		keyFile:    writePEM(t, dir, "client.key", "PRIVATE KEY", marshalKey(t, cliKey)),
		serverCert: tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey},
		roots:      x509.NewCertPool(),
	}
	p.roots.AddCert(ca)
	return p
}

// makeCert signs tmpl with parent (self-signed when parent is nil).
func makeCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func marshalKey(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t *testing.T, dir, name, blockType string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func tlsServer(creds bootstrap.TLSCreds) bootstrap.ServerConfig {
	return bootstrap.ServerConfig{
		ServerURI:    "localhost:443",
		ChannelCreds: []bootstrap.ChannelCreds{{Type: "tls", TLS: &creds}},
	}
}

// TestTransportCredentialsHandshake checks that the files really end up in
// the TLS config: the client must trust the test CA and present its
// certificate to a server that demands one.
func TestTransportCredentialsHandshake(t *testing.T) {
	p := newPKI(t)
	creds, err := tlsServer(bootstrap.TLSCreds{
		CACertificateFile: p.caFile, CertificateFile: p.certFile, PrivateKeyFile: p.keyFile,
	}).TransportCredentials()
	if err != nil {
		t.Fatalf("TransportCredentials() error = %v", err)
	}
	if got := creds.Info().SecurityProtocol; got != "tls" {
		t.Errorf("SecurityProtocol = %q, want tls", got)
	}

	clientConn, serverConn := net.Pipe()
	defer clientConn.Close()
	serverDone := make(chan error, 1)
	go func() {
		defer serverConn.Close()
		srv := tls.Server(serverConn, &tls.Config{
			Certificates: []tls.Certificate{p.serverCert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    p.roots,
			NextProtos:   []string{"h2"},
			MinVersion:   tls.VersionTLS12,
		})
		err := srv.Handshake()
		if err == nil && len(srv.ConnectionState().PeerCertificates) == 0 {
			err = os.ErrInvalid
		}
		serverDone <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := creds.ClientHandshake(ctx, "localhost:443", clientConn)
	if err != nil {
		t.Fatalf("ClientHandshake() error = %v", err)
	}
	defer conn.Close()
	if err := <-serverDone; err != nil {
		t.Fatalf("server handshake error = %v", err)
	}
}

func TestTransportCredentials(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name     string
		server   bootstrap.ServerConfig
		protocol string // when no error is wanted
		wantErr  []string
	}{
		{name: "insecure", protocol: "insecure", server: bootstrap.ServerConfig{
			ServerURI: "s:1", ChannelCreds: []bootstrap.ChannelCreds{{Type: "insecure"}}}},
		{name: "unsupported skipped", protocol: "insecure", server: bootstrap.ServerConfig{
			ServerURI: "s:1", ChannelCreds: []bootstrap.ChannelCreds{{Type: "mystery"}, {Type: "insecure"}, {Type: "tls"}}}},
		{name: "tls with system roots", protocol: "tls", server: tlsServer(bootstrap.TLSCreds{})},
		{name: "tls from raw config", protocol: "tls", server: bootstrap.ServerConfig{ServerURI: "s:1",
			ChannelCreds: []bootstrap.ChannelCreds{{Type: "tls", Config: []byte(`{"ca_certificate_file":"` + p.caFile + `"}`)}}}},
		{name: "tls ca only", protocol: "tls", server: tlsServer(bootstrap.TLSCreds{CACertificateFile: p.caFile})},
		{name: "tls client cert only", protocol: "tls", server: tlsServer(bootstrap.TLSCreds{CertificateFile: p.certFile, PrivateKeyFile: p.keyFile})},
		{name: "none supported", server: bootstrap.ServerConfig{ServerURI: "s:1",
			ChannelCreds: []bootstrap.ChannelCreds{{Type: "mystery"}}},
			wantErr: []string{`"s:1"`, "channel_creds", "mystery"}},
		{name: "missing ca file", server: tlsServer(bootstrap.TLSCreds{CACertificateFile: missing}),
			wantErr: []string{"ca_certificate_file", missing}},
		{name: "ca file without certificates", server: tlsServer(bootstrap.TLSCreds{CACertificateFile: garbage}),
			wantErr: []string{"ca_certificate_file", garbage}},
		{name: "missing certificate file", server: tlsServer(bootstrap.TLSCreds{CertificateFile: missing, PrivateKeyFile: p.keyFile}),
			wantErr: []string{"certificate_file", missing}},
		{name: "missing key file", server: tlsServer(bootstrap.TLSCreds{CertificateFile: p.certFile, PrivateKeyFile: missing}),
			wantErr: []string{"private_key_file", missing}},
		{name: "key is not a key", server: tlsServer(bootstrap.TLSCreds{CertificateFile: p.certFile, PrivateKeyFile: p.caFile}),
			wantErr: []string{"private_key_file " + p.caFile}},
		{name: "cert without key", server: tlsServer(bootstrap.TLSCreds{CertificateFile: p.certFile}),
			wantErr: []string{"channel_creds[0].config.private_key_file: must be set"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creds, err := tt.server.TransportCredentials()
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("TransportCredentials() succeeded, want error mentioning %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("TransportCredentials() error = %q, want it to mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("TransportCredentials() error = %v", err)
			}
			if got := creds.Info().SecurityProtocol; got != tt.protocol {
				t.Errorf("SecurityProtocol = %q, want %q", got, tt.protocol)
			}
		})
	}
}

func TestSelectedCreds(t *testing.T) {
	tests := []struct {
		name  string
		creds []bootstrap.ChannelCreds
		want  string
	}{
		{"first supported", []bootstrap.ChannelCreds{{Type: "tls"}, {Type: "insecure"}}, "tls"},
		{"unsupported skipped", []bootstrap.ChannelCreds{{Type: "mystery"}, {Type: ""}, {Type: "insecure"}}, "insecure"},
		{"case matters", []bootstrap.ChannelCreds{{Type: "TLS"}, {Type: "insecure"}}, "insecure"},
		{"none supported", []bootstrap.ChannelCreds{{Type: "mystery"}}, ""},
		{"empty", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := bootstrap.ServerConfig{ServerURI: "s:1", ChannelCreds: tt.creds}
			if got := s.SelectedCreds().Type; got != tt.want {
				t.Errorf("SelectedCreds().Type = %q, want %q", got, tt.want)
			}
		})
	}
}
