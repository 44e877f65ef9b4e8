package httpxds

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/route"
)

// Envoy's max_pending_requests and max_connections
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/circuit_breaking)
// over net/http's connection pools, one http.Transport per endpoint,
// which neither says whether a request will wait for a connection nor
// bounds connections across hosts (MaxConnsPerHost is per endpoint). So
// each endpoint's httpConn keeps counts of its own:
//
//   - conns, its connections open (counted when dialled, until closed),
//     and busy, the requests holding one. A request picked for the
//     endpoint finds a connection at once (cluster.PendingConn's
//     Dispatch) when fewer than conns are busy on HTTP/1.1 (one request
//     per connection), or when one is open at all on HTTP/2
//     (multiplexed); it then counts as busy from the start. Otherwise it
//     is pending, under the leaf's max_pending_requests, which the picker
//     applies (503 with x-envoy-overloaded past it): it goes out with an
//     httptrace.ClientTrace whose GotConn ends the wait and counts it
//     busy. Only such requests pay for it (two contexts, the wait with
//     its trace, and a copy of the request): the keep-alive path pays
//     two atomic adds. An HTTP/2 request that net/http finds no stream
//     for (the server's MAX_CONCURRENT_STREAMS taken on every
//     connection) waits for a new connection without counting as
//     pending: the count cannot see it. net/http's pool does not wait
//     for a stream (HTTP2Config.StrictMaxConcurrentRequests is off): it
//     dials another connection, which waits only under max_connections.
//     Telling that a request will dial needs each connection's free
//     streams, which the pooled Transport does not expose (the peer's
//     SETTINGS are inside TLS, and http.ClientConn's Available is only
//     for connections made by Transport.NewClientConn, outside the
//     pool, which would mean a pool of our own); counting the dial
//     itself as the pending request would guess which request it is
//     for, and net/http also dials for a connection that is closing.
//   - open, its connections open or being dialled, and a dialer that
//     takes each new connection's place under the leaf's max_connections
//     (cluster.Limits.AcquireConn), given back when the connection closes.
//     Past the limit the dial waits for a connection of the cluster to
//     close, while net/http hands the request the endpoint's own
//     connection if one frees first: the request waits as Envoy's pending
//     request does, and its dial, which net/http would keep going, gives
//     up (so that it takes no place another request waits for). An
//     endpoint with no connection at all dials anyway, as Envoy makes
//     sure a host the balancer picks has one.
//
// A connection counts against the leaf of the request that dialled it
// (its context carries the leaf's Limits; a dial net/http starts for a
// request that was not pending, which happens when a connection it
// counted free was closing, counts against the leaf of the endpoint's
// last pending request). An endpoint shared by two clusters keeps one
// pool, so its connections serve both.

// pendingKey is the context key of a pending request's pendingWait, read
// by the dialer.
type pendingKey struct{}

// Dispatch implements cluster.PendingConn.
func (c *httpConn) Dispatch() bool {
	if c.multiplexed.Load() {
		if c.conns.Load() > 0 {
			c.busy.Add(1)
			return true
		}
		return false
	}
	if c.busy.Add(1) <= c.conns.Load() {
		return true
	}
	c.busy.Add(-1)
	return false
}

// pendingWait is a pending request's wait for a connection. pick is its
// pick's Done, Started once it has a connection: a request that never
// gets one was never issued.
type pendingWait struct {
	lim   *cluster.Limits
	c     *httpConn
	pick  cluster.Done
	trace httptrace.ClientTrace
	// state: 0 waiting, 1 got a connection, 2 ended without; done is
	// closed when it leaves 0, so that a dial of the request still
	// waiting for a place under max_connections gives up (net/http
	// dials for each request that finds no idle connection, and keeps
	// the dial going when the request is served otherwise).
	state atomic.Int32
	done  chan struct{}
}

// pending returns req to be sent as a pending request of lim: its
// context carries the wait for the dialer, and a trace whose GotConn
// ends it and starts pick.
func (c *httpConn) pending(req *http.Request, lim *cluster.Limits, pick cluster.Done) (*http.Request, *pendingWait) {
	pw := &pendingWait{lim: lim, c: c, pick: pick, done: make(chan struct{})}
	pw.trace.GotConn = pw.gotConn
	if c.limits.Load() != lim {
		c.limits.Store(lim)
	}
	ctx := context.WithValue(httptrace.WithClientTrace(req.Context(), &pw.trace), pendingKey{}, pw)
	return req.WithContext(ctx), pw
}

func (pw *pendingWait) gotConn(httptrace.GotConnInfo) {
	if pw.state.CompareAndSwap(0, 1) {
		pw.lim.EndPending()
		pw.c.busy.Add(1)
		pw.pick.Started()
		close(pw.done)
	}
}

// end ends the wait if the request got no connection, once the round
// trip returned; it reports whether the request holds one (busy).
func (pw *pendingWait) end() bool {
	if pw.state.CompareAndSwap(0, 2) {
		pw.lim.EndPending()
		close(pw.done)
		return false
	}
	return pw.state.Load() == 1
}

// pendingOutcome is what outlier detection hears of a pending request
// that never got a connection, whose round trip under the attempt's
// context ctx failed with err (gone: its caller went away). A connection
// that could not be made is the endpoint's failure; a wait that the
// attempt's own end (its per-try or route timeout) cut short is not:
// Envoy's outlier detection counts as locally originated the events that
// interrupted or prevented communication with the host (timeouts,
// resets, failures to connect:
// https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier),
// and a request still waiting in the pool had none with it. A dial's own
// failure (a connect timeout included) is known by its error, however the
// attempt ended (nil: nothing to count).
func pendingOutcome(ctx context.Context, err error, gone bool) error {
	if gone || (ctx.Err() != nil && failureOf(err) != route.ConnectFailure) {
		return nil
	}
	return upstreamFailure{err}
}

// claimed ends a pick's wait, if pending, once its round trip returned,
// and reports whether the request counts as busy on c (afterUse ends
// that).
func (c *httpConn) claimed(res *cluster.Result, pw *pendingWait) bool {
	if pw != nil {
		return pw.end()
	}
	return res.Limits != nil
}

// unpick gives back what a pick not sent counted: its wait, or its
// connection.
func (c *httpConn) unpick(res *cluster.Result) {
	switch {
	case res.Pending:
		res.Limits.EndPending()
	case res.Limits != nil:
		c.busy.Add(-1)
	}
}

// dialLimited makes a connection with dial under the max_connections
// of the leaf whose request asked for it.
func (c *httpConn) dialLimited(ctx context.Context, dial func() (net.Conn, error)) (net.Conn, error) {
	lim := c.limits.Load()
	var abandon chan struct{}
	if pw, _ := ctx.Value(pendingKey{}).(*pendingWait); pw != nil {
		lim, abandon = pw.lim, pw.done
	}
	force := c.open.Add(1) == 1 // the endpoint has no other connection
	if lim != nil {
		if err := lim.AcquireConn(ctx, force, c.gone, abandon); err != nil {
			c.open.Add(-1)
			return nil, fmt.Errorf("waiting for a connection under cluster %q's max_connections (%d): %w", lim.Cluster(), lim.MaxConnections(), err)
		}
	}
	conn, err := dial()
	if err != nil {
		c.open.Add(-1)
		if lim != nil {
			lim.ReleaseConn()
		}
		return nil, err
	}
	c.conns.Add(1)
	return &countedConn{Conn: conn, c: c, lim: lim}, nil
}

// countedConn is a connection counted on its endpoint and under its
// leaf's max_connections until closed.
type countedConn struct {
	net.Conn
	c      *httpConn
	lim    *cluster.Limits
	closed atomic.Bool
}

// ReadFrom implements io.ReaderFrom: net/http hands a request body to the
// connection whole through it, which a *net.TCPConn sends with sendfile
// or splice when it is a file; embedding net.Conn alone would hide it.
func (cc *countedConn) ReadFrom(r io.Reader) (int64, error) { return readFrom(cc.Conn, r) }

// readFrom copies r to conn with conn's own ReadFrom if it has one.
func readFrom(conn net.Conn, r io.Reader) (int64, error) {
	if rf, ok := conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	// Only its Write, lest io.Copy call the caller's ReadFrom again.
	return io.Copy(struct{ io.Writer }{conn}, r)
}

func (cc *countedConn) Close() error {
	if cc.closed.CompareAndSwap(false, true) {
		cc.c.conns.Add(-1)
		cc.c.open.Add(-1)
		if cc.lim != nil {
			cc.lim.ReleaseConn()
		}
	}
	return cc.Conn.Close()
}
