package endpoint_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
)

// connRecorder is a ConnMetrics that keeps what it hears, one line each.
type connRecorder struct{ heard []string }

func (r *connRecorder) ConnectionAttemptSucceeded(target, backendService, locality string) {
	r.heard = append(r.heard, fmt.Sprintf("%s %s %s succeeded", target, backendService, locality))
}

func (r *connRecorder) ConnectionAttemptFailed(target, backendService, locality string) {
	r.heard = append(r.heard, fmt.Sprintf("%s %s %s failed", target, backendService, locality))
}

func (r *connRecorder) Disconnection(target, backendService, locality, reason string) {
	r.heard = append(r.heard, fmt.Sprintf("%s %s %s disconnected: %s", target, backendService, locality, reason))
}

func (r *connRecorder) OpenConnections(target, backendService, locality string, delta int) {
	r.heard = append(r.heard, fmt.Sprintf("%s %s %s open %+d", target, backendService, locality, delta))
}

func (r *connRecorder) take() []string {
	h := r.heard
	r.heard = nil
	return h
}

const labels = `t c {region="r", zone="z", sub_zone="s"}`

func newMeter(rec *connRecorder) *endpoint.ConnMeter {
	return endpoint.NewConnMeter(endpoint.NewConnSink(rec, "t"),
		endpoint.NewConnLabels("c", resources.LocalityID{Region: "r", Zone: "z", SubZone: "s"}))
}

// A connection's states, as a transport reports them, measured as gRFC
// A94 counts them: an attempt ends when the connection is ready
// (succeeded, one more open) or fails; a ready connection lost is a
// disconnection (one fewer open) with the reason its error gives; one
// made and lost before it was ready is an attempt that succeeded and a
// disconnection, none left open; a state reported again, or a
// connection going from failed through idle back to connecting, ends
// nothing. Nothing is reported until the events are.
func TestConnMeterStates(t *testing.T) {
	rec := &connRecorder{}
	m := newMeter(rec)
	var evs endpoint.ConnEvents
	steps := []struct {
		s    endpoint.State
		err  error
		want []string
	}{
		{endpoint.Connecting, nil, nil},
		{endpoint.Connecting, nil, nil},
		{endpoint.TransientFailure, errors.New("refused"), []string{labels + " failed"}},
		{endpoint.Idle, nil, nil},
		{endpoint.Connecting, nil, nil},
		{endpoint.Ready, nil, []string{labels + " succeeded", labels + " open +1"}},
		{endpoint.Ready, nil, nil},
		{endpoint.Idle, nil, []string{labels + " disconnected: unknown", labels + " open -1"}},
		{endpoint.Connecting, nil, nil},
		{endpoint.Ready, nil, []string{labels + " succeeded", labels + " open +1"}},
		{endpoint.Idle, &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
			[]string{labels + " disconnected: connection reset", labels + " open -1"}},
		{endpoint.Connecting, nil, nil},
		{endpoint.Idle, nil, []string{labels + " succeeded", labels + " disconnected: unknown"}},
	}
	for i, st := range steps {
		e := m.Observe(st.s, st.err)
		if len(rec.heard) != 0 {
			t.Fatalf("step %d (%v): reported before Report: %q", i, st.s, rec.heard)
		}
		if e.Empty() != (st.want == nil) {
			t.Errorf("step %d (%v): event empty %v, want %q", i, st.s, e.Empty(), st.want)
		}
		evs.Add(e)
		e.Report()
		if got := rec.take(); !slices.Equal(got, st.want) {
			t.Errorf("step %d (%v): %q, want %q", i, st.s, got, st.want)
		}
	}
	// The collected events report the same, in order.
	evs.Report()
	want := []string{labels + " failed", labels + " succeeded", labels + " open +1",
		labels + " disconnected: unknown", labels + " open -1", labels + " succeeded", labels + " open +1",
		labels + " disconnected: connection reset", labels + " open -1",
		labels + " succeeded", labels + " disconnected: unknown"}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Errorf("ConnEvents.Report: %q, want %q", got, want)
	}
}

// A connection the client shuts down while ready is a disconnection with
// reason "subchannel shutdown"; one shut down while connecting is no
// attempt at all (gRFC A94); what either reports after is not measured.
func TestConnMeterShut(t *testing.T) {
	rec := &connRecorder{}
	ready := newMeter(rec)
	ready.Observe(endpoint.Connecting, nil)
	ready.Observe(endpoint.Ready, nil).Report()
	rec.take()
	ready.Shut().Report()
	ready.Shut().Report()
	ready.Observe(endpoint.Idle, nil).Report()
	if got, want := rec.take(), []string{labels + " disconnected: subchannel shutdown", labels + " open -1"}; !slices.Equal(got, want) {
		t.Errorf("shut while ready: %q, want %q", got, want)
	}

	connecting := newMeter(rec)
	connecting.Observe(endpoint.Connecting, nil)
	if e := connecting.Shut(); !e.Empty() {
		t.Error("shut while connecting: an event")
	}
	connecting.Observe(endpoint.Ready, nil).Report()
	connecting.Observe(endpoint.Idle, nil).Report()
	if got := rec.take(); len(got) != 0 {
		t.Errorf("shut while connecting, then ready and lost: %q, want nothing", got)
	}
}

// A client that does not measure its connections (no ConnMetrics, or an
// endpoint without labels) has nil meters, which measure nothing.
func TestConnMeterNil(t *testing.T) {
	if s := endpoint.NewConnSink(nil, "t"); s != nil {
		t.Errorf("NewConnSink(nil) = %v, want nil", s)
	}
	rec := &connRecorder{}
	for _, m := range []*endpoint.ConnMeter{
		endpoint.NewConnMeter(nil, endpoint.NewConnLabels("c", resources.LocalityID{})),
		endpoint.NewConnMeter(endpoint.NewConnSink(rec, "t"), nil),
	} {
		if m != nil {
			t.Fatalf("NewConnMeter = %v, want nil", m)
		}
		var evs endpoint.ConnEvents
		evs.Add(m.Observe(endpoint.Connecting, nil))
		evs.Add(m.Observe(endpoint.Ready, nil))
		evs.Add(m.Shut())
		if len(evs) != 0 {
			t.Errorf("nil meter: %d events", len(evs))
		}
		evs.Report()
	}
	if len(rec.heard) != 0 {
		t.Errorf("heard %q", rec.heard)
	}
}

// The reasons of gRFC A94's grpc.disconnect_error, from the error a
// connection was lost with, wrapped as the net package wraps them.
func TestDisconnectReason(t *testing.T) {
	sys := func(e syscall.Errno) error {
		return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", e)}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "unknown"},
		{io.EOF, "unknown"},
		{errors.New("something else"), "unknown"},
		{sys(syscall.ECONNRESET), "connection reset"},
		{sys(syscall.ETIMEDOUT), "connection timed out"},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, "connection timed out"},
		{sys(syscall.ECONNABORTED), "connection aborted"},
		{sys(syscall.EPIPE), "socket error"},
	} {
		if got := endpoint.DisconnectReason(c.err); got != c.want {
			t.Errorf("DisconnectReason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
