package test

import (
	"testing"
	"time"
)

// Client.Authorities tells which server of an authority is in use and
// how each is: with the primary down at start, the fallback is current
// and connected, the primary in use (the client keeps reconnecting to
// it), unreachable since its first failure, with the error; once the
// primary answers it is current and connected again, since then, its last
// error kept, and the fallback is released.
func TestAuthoritiesReportServersAndFallback(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		fres := svc(2001)
		e := newFallbackEnv(t, p, nil, &fres)
		if got := e.c.Authorities(); len(got) != 0 {
			t.Fatalf("Authorities before any watch = %+v, want none", got)
		}
		start := time.Now()
		tr := watchTree(e.c)
		tr.wantFrom(t, "127.0.0.1:2001")
		got := e.c.Authorities()
		if len(got) != 1 || got[0].Name != "" || len(got[0].Servers) != 2 {
			t.Fatalf("Authorities = %+v, want the top-level one with two servers", got)
		}
		a := got[0]
		if a.Current != 1 {
			t.Errorf("Current = %d with the primary down, want 1 (the fallback)", a.Current)
		}
		pri, fb := a.Servers[0], a.Servers[1]
		if pri.ServerURI != e.paddr || fb.ServerURI != e.fallback.Address() {
			t.Errorf("server URIs %q, %q, want %q, %q", pri.ServerURI, fb.ServerURI, e.paddr, e.fallback.Address())
		}
		if !pri.InUse || pri.Connected || pri.Err == nil || pri.LastErr == nil || !within(pri.Since, start) || !within(pri.LastErrAt, pri.Since) {
			t.Errorf("primary, down: %+v, want in use, not connected, unreachable since the test began, with its error", pri)
		}
		if !fb.InUse || !fb.Connected || fb.Err != nil || !within(fb.Since, start) {
			t.Errorf("fallback, serving: %+v, want in use and connected since the test began, no error", fb)
		}

		back := time.Now()
		e.startPrimary(svc(1001))
		wantAddresses(t, tr.e.wantUpdate(t, "svc-cluster"), "127.0.0.1:1001")
		e.waitFallbackClosed()
		a = e.c.Authorities()[0]
		pri, fb = a.Servers[0], a.Servers[1]
		if a.Current != 0 {
			t.Errorf("Current = %d with the primary back, want 0", a.Current)
		}
		if !pri.InUse || !pri.Connected || pri.Err != nil || !within(pri.Since, back) || pri.LastErr == nil || pri.LastErrAt.After(pri.Since) {
			t.Errorf("primary, back: %+v, want connected since it started, no error, the last one kept", pri)
		}
		if fb.InUse || fb.Connected || !fb.Since.IsZero() {
			t.Errorf("fallback, released: %+v, want not in use and nothing else", fb)
		}
	})
}

// within tells whether at is from since to now.
func within(at, since time.Time) bool {
	return !at.Before(since) && !at.After(time.Now())
}
