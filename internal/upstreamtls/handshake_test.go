package upstreamtls_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/internal/upstreamtls"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// handshakeWith runs Handshake against a TLS server on 127.0.0.1
// presenting cert, and returns the client's result and the SNI the server
// saw.
func handshakeWith(t *testing.T, hi *upstreamtls.HandshakeInfo, cert tls.Certificate, hostname string) (*tls.Conn, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	sni := make(chan string, 1)
	served := make(chan struct{})
	go func() {
		defer close(served)
		raw, err := lis.Accept()
		if err != nil {
			return
		}
		defer raw.Close()
		srv := tls.Server(raw, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
			GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) { sni <- h.ServerName; return nil, nil }})
		_ = srv.HandshakeContext(ctx)
	}()
	raw, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := hi.Handshake(ctx, raw, hostname, []string{"h2"})
	raw.Close()
	<-served
	select {
	case s := <-sni:
		return conn, s, err
	default:
		t.Fatal("the server saw no ClientHello")
	}
	return nil, "", nil
}

// Handshake verifies the server's chain against the root provider's
// roots and its name against the SNI sent (gRFC A101's
// auto_sni_san_validation), and names the peer when it fails.
func TestHandshake(t *testing.T) {
	pki := testutils.NewPKI(t)
	cert := pki.Issue("server", testutils.CertOptions{DNSNames: []string{"good.test"}}).TLS
	cfg, err := json.Marshal(map[string]string{"ca_certificate_file": pki.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	b := &bootstrap.Config{CertificateProviders: map[string]bootstrap.CertificateProvider{"roots": {PluginName: "file_watcher", Config: cfg}}}
	hiFor := func(sc *resources.SecurityConfig) *upstreamtls.HandshakeInfo {
		hi, err := upstreamtls.New(b, sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(hi.Close)
		return hi
	}

	good := hiFor(&resources.SecurityConfig{RootInstance: "roots", SNI: "good.test", AutoSNISANValidation: true})
	conn, sni, err := handshakeWith(t, good, cert, "")
	if err != nil {
		t.Fatalf("handshake with a server valid for the SNI: %v", err)
	}
	if sni != "good.test" || conn.ConnectionState().ServerName != "good.test" {
		t.Errorf("SNI sent %q, want good.test", sni)
	}

	// auto_host_sni: the endpoint's hostname is the SNI, and what the
	// certificate must be valid for.
	auto := hiFor(&resources.SecurityConfig{RootInstance: "roots", SNI: "good.test", AutoHostSNI: true, AutoSNISANValidation: true})
	if _, sni, err := handshakeWith(t, auto, cert, "other.test"); err == nil || sni != "other.test" ||
		!strings.Contains(err.Error(), "TLS handshake with 127.0.0.1:") || !strings.Contains(err.Error(), `do not match the SNI "other.test"`) {
		t.Errorf("auto_host_sni with a hostname the server is not valid for: SNI %q, err %v; want the hostname sent, and a failure naming the peer and the SNI", sni, err)
	}

	// A chain from another CA fails.
	stranger := testutils.NewPKI(t).Issue("server", testutils.CertOptions{DNSNames: []string{"good.test"}}).TLS
	if _, _, err := handshakeWith(t, good, stranger, ""); err == nil {
		t.Error("a server whose chain the roots do not trust was accepted")
	}
}
