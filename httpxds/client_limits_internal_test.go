package httpxds

import "testing"

// An endpoint's requests find a connection at once when one of its
// HTTP/1.1 connections is free (one request each), or when it has an
// HTTP/2 connection at all (multiplexed); else they wait as pending
// requests (client_limits.go).
func TestDispatch(t *testing.T) {
	var h1 httpConn
	if h1.Dispatch() {
		t.Fatal("HTTP/1.1, no connection: dispatched")
	}
	h1.conns.Store(2)
	if !h1.Dispatch() || !h1.Dispatch() {
		t.Fatal("HTTP/1.1, 2 connections free: not dispatched")
	}
	if h1.Dispatch() || h1.busy.Load() != 2 {
		t.Fatalf("HTTP/1.1, 2 connections busy: dispatched (busy %d)", h1.busy.Load())
	}
	h1.afterUse(true)
	if !h1.Dispatch() {
		t.Fatal("HTTP/1.1, a connection freed: not dispatched")
	}

	var h2 httpConn
	h2.multiplexed.Store(true)
	if h2.Dispatch() {
		t.Fatal("HTTP/2, no connection: dispatched")
	}
	h2.conns.Store(1)
	for range 10 {
		if !h2.Dispatch() {
			t.Fatal("HTTP/2, a connection: not dispatched")
		}
	}
}
