package test

import (
	"testing"
	"time"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
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

// Since follows the client's clock through a server's life: when the
// client began to use it, then when it was found down (the outage), then
// when it answered again; LastErrAt is when the outage's stream failed.
// Everything is cached, so the client stays with the one server.
func TestAuthoritiesSinceFollowsTheServer(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := testutils.NewFakeClock(t0)
	acks := make(chan string, 100)
	opts := ackHooks(acks)
	ms, err := testutils.StartManagementServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := ms.Update(testContext(t), nodeID, svc(1001)); err != nil {
		t.Fatal(err)
	}
	addr := ms.Address()
	c := newClient(t, addr, sotw, config{clock: clock})
	cl := newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "svc-cluster", cl)
	cl.wantUpdate(t, "svc-cluster")
	server := func() client.ServerStatus {
		t.Helper()
		as := c.Authorities()
		if len(as) != 1 || len(as[0].Servers) != 1 {
			t.Fatalf("Authorities = %+v, want one with one server", as)
		}
		return as[0].Servers[0]
	}
	if s := server(); !s.Connected || !s.Since.Equal(t0) || s.Err != nil || s.LastErr != nil {
		t.Errorf("serving: %+v, want connected since %v, no error", s, t0)
	}

	clock.Advance(time.Minute)
	ms.Stop()
	held := holdPort(t, addr) // fails the client's streams without an answer
	cl.wantError(t, "ambient-error", client.ErrServerUnavailable, "svc-cluster")
	down := t0.Add(time.Minute)
	if s := server(); s.Connected || !s.Since.Equal(down) || s.Err == nil || s.LastErr == nil || !s.LastErrAt.Equal(down) {
		t.Errorf("down: %+v, want unreachable since %v, with the error, the last error at %v", s, down, down)
	}

	for len(acks) > 0 {
		<-acks // the first server's
	}
	clock.Advance(time.Minute)
	held.release()
	opts.Address = addr
	ms, err = testutils.StartManagementServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	if err := ms.Update(testContext(t), nodeID, svc(1001)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-acks: // an ACK of the server back: its response applied
	case <-time.After(timeout):
		t.Fatal("no ACK of the server back")
	}
	back := t0.Add(2 * time.Minute)
	// The last error is the outage's, or a refused dial just before the
	// server came back.
	if s := server(); !s.Connected || !s.Since.Equal(back) || s.Err != nil || s.LastErrAt.Before(down) || s.LastErrAt.After(back) {
		t.Errorf("back: %+v, want connected since %v, no error, the last from %v to %v", s, back, down, back)
	}
}
