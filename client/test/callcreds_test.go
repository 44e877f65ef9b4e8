package test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/testutils"
)

// jwtToken returns an unsigned JWT whose claims are exp and sub: the
// client reads only "exp" (gRFC A97); checking the signature is the
// server's business, and this test's server compares the whole token.
func jwtToken(sub string, exp time.Time) string {
	enc := base64.RawURLEncoding
	claims := fmt.Sprintf(`{"sub":%q,"exp":%d}`, sub, exp.Unix())
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
		enc.EncodeToString([]byte(claims)) + "." + enc.EncodeToString([]byte("sig-"+sub))
}

// tokenGate is a management server's check of the bearer token on each
// stream: it records every authorization header it sees, in order, and
// lets through only the token it currently accepts. Recording never
// blocks a stream, however many there are.
type tokenGate struct {
	mu     sync.Mutex
	want   string        // guarded by mu: the header accepted now
	seen   []string      // guarded by mu: "Bearer <token>", or "" for a stream with none
	read   int           // guarded by mu: how many of seen next has returned
	signal chan struct{} // has a value when seen has grown since next looked
}

func newTokenGate() *tokenGate {
	return &tokenGate{signal: make(chan struct{}, 1)}
}

func (g *tokenGate) accept(token string) {
	g.mu.Lock()
	g.want = "Bearer " + token
	g.mu.Unlock()
}

func (g *tokenGate) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	md, _ := metadata.FromIncomingContext(ss.Context())
	got := strings.Join(md.Get("authorization"), ",")
	g.mu.Lock()
	g.seen = append(g.seen, got)
	ok := got == g.want
	g.mu.Unlock()
	select {
	case g.signal <- struct{}{}:
	default:
	}
	if !ok {
		return grpcstatus.Errorf(codes.Unauthenticated, "token %q not accepted", got)
	}
	return h(srv, ss)
}

// next returns the next authorization header the server saw.
func (g *tokenGate) next(t *testing.T) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		g.mu.Lock()
		if g.read < len(g.seen) {
			got := g.seen[g.read]
			g.read++
			g.mu.Unlock()
			return got
		}
		g.mu.Unlock()
		select {
		case <-g.signal:
		case <-deadline:
			t.Fatal("no stream reached the management server")
			return ""
		}
	}
}

// TestE2EJWTCallCredsRotated runs a client against go-control-plane's
// server over TLS on 127.0.0.1, its bootstrap naming a jwt_token_file call
// credential (gRFC A97), on every gRPC variant (ADS and per-type streams
// share the channel's credentials). The server accepts a stream only with the bearer
// token it expects. The first stream carries the token in the file. The
// token is then rotated (a new token written to the file, the old one no
// longer accepted: the server restarts knowing only the new one); the
// client, without a restart, must come back with the new token and be
// served again.
//
// The credentials cache a token until 30 s before its expiry and read the
// file again from a minute before that (gRFC A97), so the first token
// expires 85 s after the test starts: the client reads the file again as
// soon as it reconnects, as it would near the end of a real token's life.
// Until that read has finished it may present the old token once more,
// which the server refuses.
func TestE2EJWTCallCredsRotated(t *testing.T) {
	forEachProtocol(t, everyProtocol, func(t *testing.T, p protocol) {
		t.Parallel()
		pki := testutils.NewPKI(t)
		srvCert := pki.Issue("xds-server", testutils.CertOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
		gate := newTokenGate()
		old, rotated := jwtToken("first", time.Now().Add(85*time.Second)), jwtToken("second", time.Now().Add(time.Hour))
		gate.accept(old)
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := testutils.WriteFileAtomically(tokenFile, []byte(old+"\n")); err != nil {
			t.Fatal(err)
		}

		opts := testutils.ManagementServerOptions{
			GRPCServerOptions: []grpc.ServerOption{
				grpc.Creds(credentials.NewServerTLSFromCert(&srvCert.TLS)),
				grpc.StreamInterceptor(gate.intercept),
			},
			Initial: map[string]testutils.Resources{nodeID: svc(1001)},
		}
		ms, err := testutils.StartManagementServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ms.Stop)

		b := jwtBootstrap(t, ms.Address(), p, pki.CAFile, tokenFile)
		c, err := client.New(b, client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		tr := watchTree(c)
		if got := gate.next(t); got != "Bearer "+old {
			t.Fatalf("first stream's authorization = %q, want the token in the file, %q", got, "Bearer "+old)
		}
		wantAddresses(t, tr.e.wantUpdate(t, "svc-cluster"), "127.0.0.1:1001")

		// Rotate: the file gets the new token, the server accepts only it.
		if err := testutils.WriteFileAtomically(tokenFile, []byte(rotated+"\n")); err != nil {
			t.Fatal(err)
		}
		gate.accept(rotated)
		ms.Stop()
		opts.Address = ms.Address()
		opts.Initial = map[string]testutils.Resources{nodeID: svc(1002)}
		if ms, err = testutils.StartManagementServer(opts); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ms.Stop)
		for {
			got := gate.next(t)
			if got == "Bearer "+rotated {
				break
			}
			if got != "Bearer "+old {
				t.Fatalf("a stream after the rotation carried %q, want the old or the new token", got)
			}
		}
		wantAddresses(t, tr.e.wantUpdatePastOutage(t, "svc-cluster"), "127.0.0.1:1002")
	})
}

// gatedTree watches the demo tree through a client of protocol p whose
// jwt_token_file call credentials read tokenFile, from a management
// server over TLS (a certificate of pki's) that serves only the streams
// whose token gate accepts.
func gatedTree(t *testing.T, p protocol, pki *testutils.PKI, gate *tokenGate, tokenFile string) tree {
	t.Helper()
	srvCert := pki.Issue("xds-server", testutils.CertOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{
		GRPCServerOptions: []grpc.ServerOption{
			grpc.Creds(credentials.NewServerTLSFromCert(&srvCert.TLS)),
			grpc.StreamInterceptor(gate.intercept),
		},
		Initial: map[string]testutils.Resources{nodeID: svc(1001)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	c, err := client.New(jwtBootstrap(t, ms.Address(), p, pki.CAFile, tokenFile),
		client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return watchTree(c)
}

// jwtBootstrap is the bootstrap of a client of the TLS server at addr,
// speaking p, trusting caFile, with the call_creds of gRFC A97.
func jwtBootstrap(t *testing.T, addr string, p protocol, caFile, tokenFile string) *bootstrap.Config {
	t.Helper()
	doc := map[string]any{
		"xds_servers": []any{map[string]any{
			"server_uri":    addr,
			"api_type":      p.apiType,
			"channel_creds": []any{map[string]any{"type": "tls", "config": map[string]any{"ca_certificate_file": caFile}}},
			"call_creds":    []any{map[string]any{"type": "jwt_token_file", "config": map[string]any{"jwt_token_file": tokenFile}}},
		}},
		"node": map[string]any{"id": nodeID},
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bootstrap.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestJWTCallCredsRefusedOnInsecureChannel checks that a client is not
// made from a Config that would send its token in plaintext, even one
// built in code: the error names the field.
func TestJWTCallCredsRefusedOnInsecureChannel(t *testing.T) {
	b := &bootstrap.Config{
		Node: bootstrap.Node{ID: nodeID},
		Servers: []bootstrap.ServerConfig{{
			ServerURI:    "127.0.0.1:1",
			ChannelCreds: []bootstrap.ChannelCreds{{Type: bootstrap.CredsInsecure}},
			CallCreds: []bootstrap.CallCreds{{Type: bootstrap.CallCredsJWTTokenFile,
				JWT: &bootstrap.JWTCallCreds{TokenFile: filepath.Join(t.TempDir(), "token")}}},
		}},
	}
	c, err := client.New(b, client.Options{})
	if err == nil {
		c.Close()
		t.Fatal("client.New accepted jwt_token_file call credentials on an insecure channel")
	}
	if want := `xds_servers[0].call_creds[0]: "jwt_token_file" call credentials need a secure channel`; !strings.Contains(err.Error(), want) {
		t.Errorf("client.New error = %v, want it to say %q", err, want)
	}
}

// TestE2EJWTTokenFileWrittenLate: a token file that does not exist yet
// fails the stream before it reaches the server, and the watchers are
// told why, naming the file; once the file is written, a later attempt
// reads it (the credentials read the file when a call needs it, after
// their own backoff) and the client is served.
func TestE2EJWTTokenFileWrittenLate(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		pki := testutils.NewPKI(t)
		gate := newTokenGate()
		token := jwtToken("late", time.Now().Add(time.Hour))
		gate.accept(token)
		tokenFile := filepath.Join(t.TempDir(), "token")
		tr := gatedTree(t, p, pki, gate, tokenFile)
		e := tr.l.next(t)
		if e.kind == "update" || !errors.Is(e.err, client.ErrServerUnavailable) || !strings.Contains(e.err.Error(), tokenFile) {
			t.Fatalf("first event %v, want the server unavailable, naming the token file %s", e, tokenFile)
		}

		if err := testutils.WriteFileAtomically(tokenFile, []byte(token)); err != nil {
			t.Fatal(err)
		}
		if got := gate.next(t); got != "Bearer "+token {
			t.Fatalf("first stream to reach the server carried %q, want the token written", got)
		}
		tr.l.wantUpdatePastOutage(t, "svc")
	})
}
