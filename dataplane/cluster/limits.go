package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Circuit breakers on connections (Config.ConnectionLimits): Envoy's
// max_pending_requests and max_connections
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/circuit_breaking),
// which a transport with connection pools of its own enforces with the
// leaf's Limits. gRPC has no such limits (one subchannel per address), so
// grpcxds leaves them off.
//
// The picker applies max_pending_requests: when the connection of the
// endpoint it picked says the request would wait for a connection
// ([PendingConn]), the request is pending until the transport calls
// Limits.EndPending (it got a connection, or gave up), and refused at once
// ([*OverloadError], Pending) when max_pending_requests wait already. The
// transport applies max_connections where it makes connections:
// Limits.AcquireConn before each one, Limits.ReleaseConn when it closes.
// The counts are per leaf cluster, across the clusters that share it, as
// max_requests is.

// PendingConn is an endpoint.Conn whose requests may have to wait for a
// connection of the transport's own pool (HTTP: net/http's, with one
// request per HTTP/1.1 connection at a time).
type PendingConn interface {
	// Dispatch reports whether a request picked for the endpoint finds a
	// connection at once (a free one, claimed for it); if not, it waits
	// for one as a pending request. It must not block.
	Dispatch() bool
}

// Limits are one leaf cluster's max_pending_requests and max_connections,
// and what counts against them. Safe for concurrent use; the transport
// reads them from a pick (Result.Limits).
type Limits struct {
	leaf       string
	maxPending atomic.Uint32
	pending    atomic.Int64

	mu       sync.Mutex
	maxConns uint32 // guarded by mu
	conns    int64  // guarded by mu
	// freed is closed when a connection's place is given back or
	// max_connections rises, and then replaced: AcquireConn waits on
	// it. Nil when no one waits. Guarded by mu.
	freed chan struct{}

	pendingOverflows, connOverflows atomic.Uint64
	// waiting, if set (tests), is called as AcquireConn starts waiting.
	waiting func()
}

// LimitStats are a Limits' counts, Envoy's upstream_rq_pending_active,
// upstream_cx_active, upstream_rq_pending_overflow and upstream_cx_overflow.
type LimitStats struct {
	Pending, Connections                  int64
	PendingOverflows, ConnectionOverflows uint64
}

// Cluster returns the name of the leaf cluster.
func (l *Limits) Cluster() string { return l.leaf }

// MaxConnections returns max_connections.
func (l *Limits) MaxConnections() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxConns
}

// Stats returns l's counts.
func (l *Limits) Stats() LimitStats {
	l.mu.Lock()
	conns := l.conns
	l.mu.Unlock()
	return LimitStats{Pending: l.pending.Load(), Connections: conns,
		PendingOverflows: l.pendingOverflows.Load(), ConnectionOverflows: l.connOverflows.Load()}
}

// set applies the leaf's thresholds: a max_connections raised wakes the
// connections waiting for a place.
func (l *Limits) set(maxPending, maxConns uint32) {
	l.maxPending.Store(maxPending)
	l.mu.Lock()
	if maxConns > l.maxConns && l.freed != nil {
		close(l.freed)
		l.freed = nil
	}
	l.maxConns = maxConns
	l.mu.Unlock()
}

// startPending counts a request that waits for a connection, unless
// max_pending_requests wait already (it counts an overflow then).
func (l *Limits) startPending() bool {
	if l.pending.Add(1) > int64(l.maxPending.Load()) {
		l.pending.Add(-1)
		l.pendingOverflows.Add(1)
		return false
	}
	return true
}

// EndPending ends the wait of a request the pick said was pending
// (Result.Pending): it got a connection, or ended without one. Once per
// such request.
func (l *Limits) EndPending() { l.pending.Add(-1) }

// AcquireConn's errors when stop or abandon closed first.
var (
	ErrConnWaitStopped = errors.New("stopped while waiting for a connection under max_connections")
	ErrConnNotWanted   = errors.New("the request waiting for a connection under max_connections has one, or ended")
)

// AcquireConn takes a place for a new connection under max_connections:
// at once if there is one, or if force (the endpoint picked has no
// connection, open or being made: Envoy makes one anyway, so that a host
// the balancer picks can serve its pending requests), else once a
// connection of the cluster closes, counting an overflow. It fails with
// ctx's error, ErrConnWaitStopped when stop closes first (the endpoint
// is gone), or ErrConnNotWanted when abandon does (the request that
// wanted the connection no longer does: a dial waiting for it would take
// a place that another request waits for). Nil channels never close.
// Each place taken is given back by one ReleaseConn.
func (l *Limits) AcquireConn(ctx context.Context, force bool, stop, abandon <-chan struct{}) error {
	counted := false
	for {
		if !force {
			select {
			case <-abandon:
				return ErrConnNotWanted
			default:
			}
		}
		l.mu.Lock()
		if force || l.conns < int64(l.maxConns) {
			l.conns++
			l.mu.Unlock()
			return nil
		}
		if l.freed == nil {
			l.freed = make(chan struct{})
		}
		freed := l.freed
		l.mu.Unlock()
		if !counted {
			l.connOverflows.Add(1)
			counted = true
			if l.waiting != nil {
				l.waiting()
			}
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-stop:
			return ErrConnWaitStopped
		case <-abandon:
			return ErrConnNotWanted
		}
	}
}

// ReleaseConn gives back the place of a connection that closed, or whose
// making failed.
func (l *Limits) ReleaseConn() {
	l.mu.Lock()
	l.conns--
	if l.freed != nil {
		close(l.freed)
		l.freed = nil
	}
	l.mu.Unlock()
}
