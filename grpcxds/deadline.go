package grpcxds

import (
	"context"
	"time"
)

// A route's timeout (max_stream_duration, grpc_timeout_header_max) gives
// the RPC a deadline. context.WithTimeout would cost seven allocations per
// RPC (internal/deadline says which). When the application's context is
// never cancelled, the selection, which is the RPC's context already,
// carries the deadline itself (its deadline field, an
// internal/deadline.Carrier, whose timers are shared by the process).
//
// gRPC derives a context of its own from the RPC's (context.WithCancel);
// the context package links it to a parent that is not one of its own
// through the parent's AfterFunc method, which the selection has: that
// link is three allocations (the package's closure and stopCtx, and the
// stop func), so the RPC's deadline costs four with the Done channel.

// startDeadline makes s carry the RPC's deadline, timeout from now. Only
// start calls it, before s is handed to anyone else.
func (s *selection) startDeadline(timeout time.Duration) {
	s.deadline.Start(timeout)
}

// Deadline implements context.Context: the route's deadline, or the
// application's.
func (s *selection) Deadline() (time.Time, bool) {
	if s.deadline.Carries() {
		return s.deadline.Deadline(), true
	}
	return s.Context.Deadline()
}

// Done implements context.Context: closed at the route's deadline or when
// the RPC ends, if s carries the deadline; else the application's.
func (s *selection) Done() <-chan struct{} {
	if s.deadline.Carries() {
		return s.deadline.Done()
	}
	return s.Context.Done()
}

// Err implements context.Context.
func (s *selection) Err() error {
	if s.deadline.Carries() {
		return s.deadline.Err()
	}
	return s.Context.Err()
}

// AfterFunc arranges for f to run when s is done, and returns the func
// that stops that. The context package calls it (an unexported interface
// of its own) to cancel a context derived from s when s is done, such as
// the one gRPC makes for each RPC: without it, the package would start a
// goroutine per RPC to wait for s. When s does not carry a deadline, it is
// done when the application's context is, which takes f.
func (s *selection) AfterFunc(f func()) (stop func() bool) {
	if s.deadline.Carries() {
		return s.deadline.AfterFunc(f)
	}
	return context.AfterFunc(s.Context, f)
}

// endDeadline ends the deadline s carries, when the RPC ends: its shard
// forgets it, and s is done, as context.WithTimeout's cancel makes it.
func (s *selection) endDeadline() {
	s.deadline.End()
}
