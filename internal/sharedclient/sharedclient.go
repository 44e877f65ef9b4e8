// Package sharedclient holds an xDS client made on demand from a bootstrap
// and shared by its users, which keeps it open for a while after the last
// of them released it: grpcxds's Builder lends one to its channels.
//
// Why a linger: a gRPC channel going idle closes its resolver, so without
// one every idle-to-active cycle of a lone channel would close the client,
// then redial the management server and fetch the whole configuration
// again. Nothing here is gRPC's, so it is not grpcxds's either: any
// adapter whose users come and go can lend a client through it.
//
// Bootstrap is the adapters' one rule for which bootstrap they run with:
// the options', else the given Client's, else the environment's.
package sharedclient

import (
	"errors"
	"sync"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
)

// ErrClosed is what Acquire fails with once the Lender is closed.
var ErrClosed = errors.New("sharedclient: the Lender is closed")

// Timer is a started linger timer.
type Timer interface{ Stop() bool }

// Lender lends one client, made at the first Acquire, to every user until
// it is closed: after the last Release it lingers, then closes; the next
// Acquire after that makes a new one. A Lender is safe for concurrent use.
type Lender struct {
	// Read-only after New.
	cfg    *bootstrap.Config
	opts   client.Options
	linger time.Duration
	// afterFunc starts the linger timer: time.AfterFunc, but in tests.
	afterFunc func(time.Duration, func()) Timer

	mu        sync.Mutex
	c         *client.Client // the client lent, nil before one; guarded by mu
	refs      int            // users holding c; guarded by mu
	lingering Timer          // the timer that closes c once no one holds it; guarded by mu
	seq       uint64         // numbers the linger timers; guarded by mu
	closed    bool           // Close was called; guarded by mu
}

// New returns a Lender of clients made with client.New(cfg, opts), which
// linger for linger after their last user released them (zero or
// negative: closed at once).
func New(cfg *bootstrap.Config, opts client.Options, linger time.Duration) *Lender {
	return &Lender{cfg: cfg, opts: opts, linger: linger,
		afterFunc: func(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }}
}

// SetTimer replaces the linger timer (time.AfterFunc) for tests; call it
// before the first Acquire.
func (l *Lender) SetTimer(afterFunc func(d time.Duration, f func()) Timer) { l.afterFunc = afterFunc }

// Acquire returns the client, made now if there is none, and the function
// that releases it, which may be called more than once. It fails with
// ErrClosed once the Lender is closed, and with client.New's error.
func (l *Lender) Acquire() (*client.Client, func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, nil, ErrClosed
	}
	if l.lingering != nil {
		l.lingering.Stop()
		l.lingering = nil
	}
	if l.c == nil {
		c, err := client.New(l.cfg, l.opts)
		if err != nil {
			return nil, nil, err
		}
		l.c = c
	}
	l.refs++
	c := l.c
	return c, sync.OnceFunc(func() { l.release(c) }), nil
}

// release is a user letting go of c. The last one leaves it to linger,
// unless the Lender is closed or lingers for no time.
func (l *Lender) release(c *client.Client) {
	l.mu.Lock()
	l.refs--
	if l.refs > 0 || l.c != c {
		l.mu.Unlock()
		return
	}
	if !l.closed && l.linger > 0 {
		l.seq++
		seq := l.seq
		l.lingering = l.afterFunc(l.linger, func() { l.closeLingering(seq) })
		l.mu.Unlock()
		return
	}
	l.c = nil
	l.mu.Unlock()
	// Outside mu: Close waits for the client's callbacks, and a callback
	// of another user may be acquiring the client.
	c.Close()
}

// closeLingering closes the client the linger timer numbered seq was
// started for, unless a user took it (or Close closed it) since.
func (l *Lender) closeLingering(seq uint64) {
	l.mu.Lock()
	if l.lingering == nil || l.seq != seq || l.refs > 0 || l.c == nil {
		l.mu.Unlock()
		return
	}
	c := l.c
	l.c, l.lingering = nil, nil
	l.mu.Unlock()
	c.Close()
}

// Close closes the client now if no one holds it, else when the last
// user releases it, without lingering; Acquire fails from now on. It is
// safe to call more than once.
func (l *Lender) Close() {
	l.mu.Lock()
	l.closed = true
	if l.lingering != nil {
		l.lingering.Stop()
		l.lingering = nil
	}
	c := l.c
	if l.refs > 0 || c == nil {
		l.mu.Unlock()
		return
	}
	l.c = nil
	l.mu.Unlock()
	c.Close()
}
