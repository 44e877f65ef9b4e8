package client

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

// DefaultLogger returns the logger of a client given none: its warnings
// and errors go to slog.Default() and the rest nowhere.
//
// Why not discard everything: a NACK or an unreachable management server
// leaves the program on stale configuration, and a user who never set a
// logger would otherwise not learn of it until something else broke. Why
// not everything to slog.Default(): a healthy client is quiet, and the
// debug and info lines (every request and response, each reconnection)
// are for someone who asked for them. slog.Default() rather than a
// handler of our own, so that the lines reach whatever the program set
// with slog.SetDefault, or the standard log package if it set nothing.
//
// DefaultLogger is exported so that packages built on the client (grpcxds)
// treat a nil logger the same way.
func DefaultLogger() *slog.Logger { return slog.New(warnToDefault{}) }

// warnToDefault is a slog.Handler that passes records at warning level and
// above to the handler of slog.Default() as it is when the record is
// written, not when the client was made: a program may well call
// slog.SetDefault after creating its clients.
type warnToDefault struct {
	// ops are the WithAttrs and WithGroup calls made on this handler, in
	// order, replayed on the default handler for each record. Records at
	// warning level are rare, so the replay costs little.
	ops []func(slog.Handler) slog.Handler
}

// Enabled implements slog.Handler.
func (h warnToDefault) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, l)
}

// Handle implements slog.Handler.
func (h warnToDefault) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	out := slog.Default().Handler()
	for _, op := range h.ops {
		out = op(out)
	}
	return out.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h warnToDefault) WithAttrs(as []slog.Attr) slog.Handler {
	return h.with(func(o slog.Handler) slog.Handler { return o.WithAttrs(as) })
}

// WithGroup implements slog.Handler.
func (h warnToDefault) WithGroup(name string) slog.Handler {
	return h.with(func(o slog.Handler) slog.Handler { return o.WithGroup(name) })
}

func (h warnToDefault) with(op func(slog.Handler) slog.Handler) warnToDefault {
	// A fresh slice: handlers derived from one another must not share
	// backing arrays.
	return warnToDefault{ops: append(append([]func(slog.Handler) slog.Handler(nil), h.ops...), op)}
}

// lockedLog queues the lines the client logs while Client.mu is held;
// Client.unlock writes them once the mutex is released. A slog.Handler is
// the program's code: run under the mutex, a slow one would stall every
// watch, response and timer of the client, and one that calls back into
// the client (Dump, a Watch) would deadlock. Even whether a level is
// enabled is asked after unlocking, for the same reason: lines logged under
// the mutex are few (one per decision, or per resource served from disk),
// so queueing them unasked costs little.
type lockedLog struct {
	lines []slog.Record
}

// Debug queues a line at debug level.
func (q *lockedLog) Debug(msg string, args ...any) { q.add(slog.LevelDebug, msg, args) }

// Info queues a line at info level.
func (q *lockedLog) Info(msg string, args ...any) { q.add(slog.LevelInfo, msg, args) }

// Warn queues a line at warning level.
func (q *lockedLog) Warn(msg string, args ...any) { q.add(slog.LevelWarn, msg, args) }

// add makes the record now, with the time and the caller of the line as
// slog.Logger would, so that the handler sees when and where it was
// logged, not when it was written.
func (q *lockedLog) add(level slog.Level, msg string, args []any) {
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // skip Callers, add, and Debug/Info/Warn
	r := slog.NewRecord(time.Now(), level, msg, pcs[0])
	r.Add(args...)
	q.lines = append(q.lines, r)
}

// take returns the queued lines and empties the queue.
func (q *lockedLog) take() []slog.Record {
	lines := q.lines
	q.lines = nil
	return lines
}

// unlock releases Client.mu, then writes the lines logged while it was
// held (Client.logq). Every release of Client.mu goes through it.
func (c *Client) unlock() {
	lines := c.logq.take()
	c.mu.Unlock()
	if len(lines) == 0 {
		return
	}
	ctx := context.Background()
	h := c.logger.Handler()
	for _, r := range lines {
		if h.Enabled(ctx, r.Level) {
			_ = h.Handle(ctx, r)
		}
	}
}
