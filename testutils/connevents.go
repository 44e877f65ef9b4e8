package testutils

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// ConnEvents counts the connections a gRPC server accepts and sees end,
// through a stats handler (ServerOption): how a test observes, at a side
// service, that a client's channel to it is open or was closed, without
// sleeping. The zero value is ready to use.
type ConnEvents struct {
	mu     sync.Mutex
	begun  int
	ended  int
	change chan struct{} // closed and replaced at each event
}

// ServerOption is the grpc.ServerOption that reports the server's
// connections to e.
func (e *ConnEvents) ServerOption() grpc.ServerOption {
	return grpc.StatsHandler(connHandler{e})
}

// Counts are the connections begun and ended so far.
func (e *ConnEvents) Counts() (begun, ended int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.begun, e.ended
}

// WaitEnded waits until n connections have ended, or fails at ctx's end
// with the counts seen.
func (e *ConnEvents) WaitEnded(ctx context.Context, n int) error {
	for {
		e.mu.Lock()
		begun, ended := e.begun, e.ended
		ch := e.changedLocked()
		e.mu.Unlock()
		if ended >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d connections ended of %d begun, want %d ended: %w", ended, begun, n, ctx.Err())
		}
	}
}

func (e *ConnEvents) changedLocked() chan struct{} {
	if e.change == nil {
		e.change = make(chan struct{})
	}
	return e.change
}

func (e *ConnEvents) event(end bool) {
	e.mu.Lock()
	if end {
		e.ended++
	} else {
		e.begun++
	}
	close(e.changedLocked())
	e.change = nil
	e.mu.Unlock()
}

// connHandler is the stats handler of ConnEvents: connections only.
type connHandler struct{ e *ConnEvents }

func (h connHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (h connHandler) HandleRPC(context.Context, stats.RPCStats)                       {}
func (h connHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (h connHandler) HandleConn(_ context.Context, s stats.ConnStats) {
	switch s.(type) {
	case *stats.ConnBegin:
		h.e.event(false)
	case *stats.ConnEnd:
		h.e.event(true)
	}
}
