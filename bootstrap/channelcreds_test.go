package bootstrap_test

import (
	"context"
	"crypto/tls"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
	"google.golang.org/grpc/credentials"
)

// tdBootstrap is what Traffic Director's generator writes, trimmed.
const tdBootstrap = `{
  "xds_servers": [{
    "server_uri": "trafficdirector.googleapis.com:443",
    "channel_creds": [{"type": "google_default"}],
    "server_features": ["xds_v3", "ignore_resource_deletion"]
  }],
  "node": {"id": "projects/1/networks/default/nodes/abc", "cluster": "cluster",
    "metadata": {"TRAFFICDIRECTOR_GCP_PROJECT_NUMBER": "1"},
    "locality": {"zone": "us-central1-a"}},
  "server_listener_resource_name_template": "grpc/server?xds.resource.listening_address=%s",
  "certificate_providers": {
    "google_cloud_private_spiffe": {"plugin_name": "file_watcher", "config": {
      "certificate_file": "/var/run/gke-spiffe/certs/certificates.pem",
      "private_key_file": "/var/run/gke-spiffe/certs/private_key.pem",
      "ca_certificate_file": "/var/run/gke-spiffe/certs/ca_certificates.pem",
      "refresh_interval": "600s"}}
  }
}`

// TestGoogleDefaultCreds reads a Traffic Director bootstrap on a machine
// without Google credentials: it parses, google_default is the selected
// creds, and the failure comes when the transport is built (the first
// use), saying that application default credentials are missing. No
// network is needed: GOOGLE_APPLICATION_CREDENTIALS names a missing file,
// so the lookup stops there.
func TestGoogleDefaultCreds(t *testing.T) {
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "absent.json"))
	c, err := bootstrap.Parse([]byte(tdBootstrap))
	if err != nil {
		t.Fatalf("Parse(Traffic Director bootstrap) = %v", err)
	}
	s := c.Servers[0]
	if got := s.SelectedCreds().Type; got != bootstrap.CredsGoogleDefault {
		t.Fatalf("selected creds = %q, want google_default", got)
	}
	if !strings.Contains(s.String(), "creds=google_default") {
		t.Errorf("String() = %q", s.String())
	}
	_, err = s.ChannelCredentials()
	if err == nil || !strings.Contains(err.Error(), "no Google application default credentials") ||
		!strings.Contains(err.Error(), "channel_creds[0]: google_default") {
		t.Fatalf("ChannelCredentials() = %v, want the missing application default credentials named", err)
	}
	tr, err := transport.NewBuilder(transport.Options{}).Build(s, nil, nil)
	if err == nil {
		tr.Close()
		t.Fatal("transport Build succeeded without Google credentials")
	}
	if !strings.Contains(err.Error(), "trafficdirector.googleapis.com:443") || !strings.Contains(err.Error(), "no Google application default credentials") {
		t.Errorf("transport Build error = %v", err)
	}
}

// TestGoogleDefaultCredsFound builds google_default credentials from a
// service account file: TLS plus OAuth per call.
func TestGoogleDefaultCredsFound(t *testing.T) {
	key := filepath.Join(t.TempDir(), "sa.json")
	// An authorized_user file: its token source needs no key and no network until a token is asked for.
	if err := os.WriteFile(key, []byte(`{"type": "authorized_user", "client_id": "id", "client_secret": "s", "refresh_token": "r"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", key)
	c, err := bootstrap.Parse([]byte(tdBootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := c.Servers[0].ChannelCredentials()
	if err != nil {
		t.Fatalf("ChannelCredentials() = %v", err)
	}
	defer cc.Close()
	if cc.Transport.Info().SecurityProtocol != "tls" || cc.PerRPC == nil || !cc.PerRPC.RequireTransportSecurity() {
		t.Errorf("google_default credentials = %+v, want TLS and OAuth per call", cc)
	}
}

// TestTLSChannelCredsRotation has a TLS server that demands a client
// certificate and records each one it is shown; the client's "tls" channel
// creds (gRFC A65) re-read their files every 10ms. A certificate rotated on
// disk must be presented by a later handshake, and no handshake may fail
// on the way.
func TestTLSChannelCredsRotation(t *testing.T) {
	p := testutils.NewPKI(t)
	srv := p.Issue("server", testutils.CertOptions{DNSNames: []string{"localhost"}})
	first := p.Issue("client", testutils.CertOptions{Client: true})
	s := bootstrap.ServerConfig{ServerURI: "localhost:443", ChannelCreds: []bootstrap.ChannelCreds{{Type: "tls",
		TLS: &bootstrap.TLSCreds{CACertificateFile: p.CAFile, CertificateFile: first.CertFile, PrivateKeyFile: first.KeyFile,
			RefreshInterval: 10 * time.Millisecond}}}}
	cc, err := s.ChannelCredentials()
	if err != nil {
		t.Fatalf("ChannelCredentials() = %v", err)
	}
	defer cc.Close()
	if cc.PerRPC != nil {
		t.Error("tls creds have per-call credentials")
	}
	serverCfg := &tls.Config{Certificates: []tls.Certificate{srv.TLS}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: p.Roots, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	if got := handshakeSerial(t, cc.Transport, serverCfg); got.Cmp(first.Serial) != 0 {
		t.Fatalf("client presented serial %v, want %v", got, first.Serial)
	}
	second := p.Issue("client", testutils.CertOptions{Client: true})
	deadline := time.Now().Add(20 * time.Second)
	for n := 1; ; n++ {
		got := handshakeSerial(t, cc.Transport, serverCfg)
		if got.Cmp(second.Serial) == 0 {
			t.Logf("rotated certificate presented at handshake %d", n)
			break
		}
		if got.Cmp(first.Serial) != 0 {
			t.Fatalf("client presented serial %v, neither the first nor the rotated certificate", got)
		}
		if time.Now().After(deadline) {
			t.Fatal("rotated client certificate not presented within 20s")
		}
		time.Sleep(5 * time.Millisecond) // paces the handshakes; the event waited for is the new serial
	}
}

// handshakeSerial does one TLS handshake of creds against a server of cfg
// and returns the serial of the client certificate the server saw. A
// failed handshake fails the test.
func handshakeSerial(t *testing.T, creds credentials.TransportCredentials, cfg *tls.Config) *big.Int {
	t.Helper()
	clientConn, serverConn := net.Pipe()
	defer clientConn.Close()
	type result struct {
		serial *big.Int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		defer serverConn.Close()
		srv := tls.Server(serverConn, cfg)
		err := srv.Handshake()
		var r result
		if err == nil {
			if certs := srv.ConnectionState().PeerCertificates; len(certs) > 0 {
				r.serial = certs[0].SerialNumber
			} else {
				err = errors.New("no client certificate")
			}
		}
		r.err = err
		done <- r
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := creds.ClientHandshake(ctx, "localhost:443", clientConn)
	if err != nil {
		t.Fatalf("ClientHandshake() = %v", err)
	}
	defer conn.Close()
	r := <-done
	if r.err != nil {
		t.Fatalf("server handshake: %v", r.err)
	}
	return r.serial
}
