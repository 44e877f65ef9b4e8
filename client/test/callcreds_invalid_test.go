package test

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/testutils"
)

// TestE2EJWTTokenInvalid: gRFC A97's token whose exp cannot be read (not
// a JWT) fails the stream with UNAUTHENTICATED before it reaches the
// server, and the watchers are told; once the file holds a valid token, a
// later attempt (after the credentials' backoff) reads it and the client
// is served.
func TestE2EJWTTokenInvalid(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		pki := testutils.NewPKI(t)
		srvCert := pki.Issue("xds-server", testutils.CertOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
		gate := newTokenGate()
		token := jwtToken("valid", time.Now().Add(time.Hour))
		gate.accept(token)
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := testutils.WriteFileAtomically(tokenFile, []byte("not-a-jwt")); err != nil {
			t.Fatal(err)
		}
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
		tr := watchTree(c)
		e := tr.l.next(t)
		if e.kind == "update" || !errors.Is(e.err, client.ErrServerUnavailable) || !strings.Contains(e.err.Error(), "Unauthenticated") {
			t.Fatalf("first event %v, want the server unavailable, the stream UNAUTHENTICATED", e)
		}

		if err := testutils.WriteFileAtomically(tokenFile, []byte(token)); err != nil {
			t.Fatal(err)
		}
		if got := gate.next(t); got != "Bearer "+token {
			t.Fatalf("first stream to reach the server carried %q, want the valid token", got)
		}
		tr.l.wantUpdatePastOutage(t, "svc")
	})
}
