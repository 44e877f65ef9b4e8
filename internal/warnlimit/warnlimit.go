// Package warnlimit keeps bursts of like warnings from flooding a log. A
// zone going down fails thousands of clusters within a second, each one a
// state change of its own and each worth a warning: a log of 10,000 lines
// that says one thing, written while the process is busiest. grpcxds's
// balancer and httpxds's Transport log what their clusters decide through
// one Limiter each.
//
// A Limiter lets through the first Burst warnings of a message in a
// Window; the last one says that more are held back, and the first one
// after the window says how many were. Lines of other levels pass.
package warnlimit

import (
	"log/slog"
	"time"
)

const (
	// Burst is how many warnings of one message a Window lets through.
	Burst = 10
	// Window is the period Burst counts over.
	Window = 10 * time.Second
)

// Limiter counts the warnings of each message. Its messages are constants,
// so its map stays small. It has no lock: its owner guards it with the
// lock its lines are queued under. The zero value is ready.
type Limiter struct {
	byMsg map[string]*count
}

type count struct {
	start      time.Time // the window's
	n          int       // lines in the window, written or not
	suppressed int       // lines of the window held back
}

// Limit reports whether a line of level and msg, logged at now, is
// written, and with what arguments: args, and a note at the last line of
// a burst or the count held back at the first line after one. args is
// not changed.
func (l *Limiter) Limit(level slog.Level, msg string, args []any, now time.Time) (bool, []any) {
	if level != slog.LevelWarn {
		return true, args
	}
	ok, extra := l.allow(msg, now)
	if !ok {
		return false, nil
	}
	if len(extra) > 0 {
		args = append(args[:len(args):len(args)], extra...)
	}
	return true, args
}

// allow reports whether a warning of msg at now is written, and the
// attributes to add to it.
func (l *Limiter) allow(msg string, now time.Time) (bool, []any) {
	if l.byMsg == nil {
		l.byMsg = make(map[string]*count)
	}
	c := l.byMsg[msg]
	if c == nil || now.Sub(c.start) >= Window {
		var extra []any
		if c != nil && c.suppressed > 0 {
			extra = []any{"held_back", c.suppressed}
		}
		l.byMsg[msg] = &count{start: now, n: 1}
		return true, extra
	}
	c.n++
	switch {
	case c.n < Burst:
		return true, nil
	case c.n == Burst:
		return true, []any{"note", "further lines of this message are held back for " + Window.String() +
			"; the next one says how many"}
	}
	c.suppressed++
	return false, nil
}
