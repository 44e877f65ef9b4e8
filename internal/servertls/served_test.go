package servertls_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/goxds/xds/internal/servertls"
	"github.com/goxds/xds/testutils"
)

// Served names the certificate the handshake sent, among several chosen
// by the client's SNI (the first when none fits), and parses a leaf the
// key material left unparsed (testutils' certificates have no Leaf).
func TestServedIsTheCertificateSent(t *testing.T) {
	pki := testutils.NewPKI(t)
	a := pki.Issue("a", testutils.CertOptions{DNSNames: []string{"a.test"}})
	b := pki.Issue("b", testutils.CertOptions{DNSNames: []string{"b.test"}})
	for _, tc := range []struct {
		sni, want string
	}{{"a.test", "a"}, {"b.test", "b"}, {"", "a"}} {
		cfg := &tls.Config{Certificates: []tls.Certificate{a.TLS, b.TLS}, MinVersion: tls.VersionTLS12}
		var served *x509.Certificate
		srvCfg := &tls.Config{GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			served = servertls.Served(cfg, hello)
			return cfg, nil
		}}
		cliCfg := &tls.Config{RootCAs: pki.Roots, ServerName: tc.sni, InsecureSkipVerify: tc.sni == ""}
		got := handshake(t, srvCfg, cliCfg)
		if served == nil {
			t.Fatalf("SNI %q: Served is nil", tc.sni)
		}
		if served.Subject.CommonName != tc.want || string(served.Raw) != string(got.Raw) {
			t.Errorf("SNI %q: Served %q, want %q, the certificate sent (%q)", tc.sni, served.Subject.CommonName, tc.want, got.Subject.CommonName)
		}
	}
	if c := servertls.Served(&tls.Config{}, &tls.ClientHelloInfo{}); c != nil {
		t.Errorf("Served without certificates: %v, want nil", c.Subject)
	}
}

// handshake runs a TLS handshake over loopback TCP (buffered: a pipe
// would hold the server's session tickets until the client reads) and
// returns the leaf the client received.
func handshake(t *testing.T, srvCfg, cliCfg *tls.Config) *x509.Certificate {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	c2, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c1, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := tls.Server(c1, srvCfg)
	defer srv.Close()
	errc := make(chan error, 1)
	go func() { errc <- srv.HandshakeContext(ctx) }()
	cli := tls.Client(c2, cliCfg)
	defer cli.Close()
	if err := cli.HandshakeContext(ctx); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	return cli.ConnectionState().PeerCertificates[0]
}
