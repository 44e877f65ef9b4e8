package test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		gate := newTokenGate()
		token := jwtToken("valid", time.Now().Add(time.Hour))
		gate.accept(token)
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := testutils.WriteFileAtomically(tokenFile, []byte("not-a-jwt")); err != nil {
			t.Fatal(err)
		}
		tr := gatedTree(t, p, pki, gate, tokenFile)
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
