package httpxds

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/goxds/xds/dataplane/cluster"
)

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

// A dial waiting for a place under max_connections gives up once the
// pending request it was made for has a connection (or ended): net/http
// keeps such a dial going, and it would take the place of a request
// still waiting. A dial of a request still waiting keeps waiting, until
// its endpoint is let go.
func TestDialAbandonedWhenNotWanted(t *testing.T) {
	c := &httpConn{gone: make(chan struct{})}
	c.open.Store(1)            // a connection open: the dial is not forced
	lim := new(cluster.Limits) // max_connections 0
	dialled := false
	dial := func() (net.Conn, error) { dialled = true; return nil, errors.New("dialled") }
	served := &pendingWait{lim: lim, c: c, done: make(chan struct{})}
	close(served.done)
	ctx := context.WithValue(context.Background(), pendingKey{}, served)
	if _, err := c.dialLimited(ctx, dial); !errors.Is(err, cluster.ErrConnNotWanted) || dialled {
		t.Errorf("the request served: dial error %v (dialled %v), want ErrConnNotWanted", err, dialled)
	}
	waiting := &pendingWait{lim: lim, c: c, done: make(chan struct{})}
	ctx = context.WithValue(context.Background(), pendingKey{}, waiting)
	errc := make(chan error, 1)
	go func() {
		_, err := c.dialLimited(ctx, dial)
		errc <- err
	}()
	close(c.gone)
	if err := <-errc; !errors.Is(err, cluster.ErrConnWaitStopped) || dialled {
		t.Errorf("the endpoint let go: dial error %v (dialled %v), want ErrConnWaitStopped", err, dialled)
	}
	if n := c.open.Load(); n != 1 {
		t.Errorf("%d connections counted open after the dials gave up, want 1", n)
	}
}
