package grpcxds

import (
	"log/slog"
	"time"
)

// A zone going down fails thousands of clusters within a second, each one
// a SubConn state change of its own and each worth a warning: a log of
// 10,000 lines that says one thing, written while the channel is busiest.
// warnLimiter lets through the first warnBurst warnings of a message in a
// warnWindow; the last one says that more are held back, and the first one
// after the window says how many were. Debug lines and other levels pass.
const (
	warnBurst  = 10
	warnWindow = 10 * time.Second
)

// warnLimiter counts the warnings of each message (the messages are
// constants, so the map stays small). It is guarded by the balancer's mu.
type warnLimiter struct {
	byMsg map[string]*warnCount
}

type warnCount struct {
	start      time.Time // the window's
	n          int       // lines in the window, written or not
	suppressed int       // lines of the window held back
}

// allow reports whether a warning of msg at now is written, and the
// attributes to add to it.
func (l *warnLimiter) allow(msg string, now time.Time) (bool, []any) {
	if l.byMsg == nil {
		l.byMsg = make(map[string]*warnCount)
	}
	c := l.byMsg[msg]
	if c == nil || now.Sub(c.start) >= warnWindow {
		var extra []any
		if c != nil && c.suppressed > 0 {
			extra = []any{"held_back", c.suppressed}
		}
		l.byMsg[msg] = &warnCount{start: now, n: 1}
		return true, extra
	}
	c.n++
	switch {
	case c.n < warnBurst:
		return true, nil
	case c.n == warnBurst:
		return true, []any{"note", "further lines of this message are held back for " + warnWindow.String() +
			"; the next one says how many"}
	}
	c.suppressed++
	return false, nil
}

// limitLocked applies the balancer's warning limiter to a line about to be
// queued: it reports whether to queue it, with what arguments.
func (b *xdsBalancer) limitLocked(level slog.Level, msg string, args []any) (bool, []any) {
	if level != slog.LevelWarn {
		return true, args
	}
	ok, extra := b.warnings.allow(msg, b.clock.Now())
	if !ok {
		return false, nil
	}
	if len(extra) > 0 {
		args = append(args[:len(args):len(args)], extra...)
	}
	return true, args
}
