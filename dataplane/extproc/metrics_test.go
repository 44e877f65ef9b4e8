package extproc

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/goxds/xds/resources"
)

// fakeNow is a clock the test moves.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// recorded keeps what a Metrics hears, as "event duration".
type recorded struct {
	mu  sync.Mutex
	got []string
}

func (r *recorded) EventDuration(e Event, d time.Duration) {
	r.mu.Lock()
	r.got = append(r.got, fmt.Sprintf("%v %v", e, d))
	r.mu.Unlock()
}

func (r *recorded) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

func newMetricsTest(t *testing.T, m resources.ExtProcModes) (*Call, *fakeClient, *fakeNow, *recorded) {
	t.Helper()
	fc := &fakeClient{streams: make(chan *fakeStream, 1)}
	clock := &fakeNow{t: time.Unix(1000, 0)}
	rec := &recorded{}
	p := New(context.Background(), config(m), fc).WithNow(clock.now).WithMetrics(rec)
	c := p.NewCall(context.Background(), nil)
	t.Cleanup(c.Done)
	return c, fc, clock, rec
}

// Each of the four events is measured from when the filter sees it to
// when it lets it go on: the headers and trailers until their answer,
// the half-close until the data plane takes the end of the client's
// messages the processor gave back.
func TestMetricsEventDurations(t *testing.T) {
	c, fc, clock, rec := newMetricsTest(t, resources.ExtProcModes{RequestHeaders: true, RequestBody: true,
		ResponseHeaders: true, ResponseTrailers: true})
	h := map[string][]string{"k": {"v"}}
	res := async(func() (map[string][]string, error) { return c.ClientHeaders(h) })
	s := stream(t, fc)
	recvSent(t, s)
	clock.advance(3 * time.Millisecond)
	answerT(t, s, &Response{Kind: RequestHeaders})
	if _, err := await(t, res); err != nil {
		t.Fatal(err)
	}
	if err := c.ClientHalfClose(); err != nil {
		t.Fatal(err)
	}
	recvSent(t, s)
	clock.advance(5 * time.Millisecond)
	answerT(t, s, &Response{Kind: RequestBody, Body: &Body{EndOfStream: true, EndOfStreamWithoutMessage: true}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, ok, err := c.NextClientMessage(ctx); ok || err != nil {
		t.Fatalf("NextClientMessage: %v, %v; want the end", ok, err)
	}
	res = async(func() (map[string][]string, error) { return c.ServerHeaders(h, false) })
	recvSent(t, s)
	clock.advance(7 * time.Millisecond)
	answerT(t, s, &Response{Kind: ResponseHeaders})
	if _, err := await(t, res); err != nil {
		t.Fatal(err)
	}
	res = async(func() (map[string][]string, error) { return c.ServerTrailers(h) })
	recvSent(t, s)
	clock.advance(11 * time.Millisecond)
	answerT(t, s, &Response{Kind: ResponseTrailers})
	if _, err := await(t, res); err != nil {
		t.Fatal(err)
	}
	want := []string{"client_headers 3ms", "client_half_close 5ms", "server_headers 7ms", "server_trailers 11ms"}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("recorded %q, want %q", got, want)
	}
}

// A Trailers-Only response's headers are its trailers too; an event the
// filter fails the RPC on is not measured; one the configuration does
// not send goes on at once.
func TestMetricsTrailersOnlyFailureAndSkipped(t *testing.T) {
	c, fc, clock, rec := newMetricsTest(t, resources.ExtProcModes{ResponseHeaders: true})
	if _, err := c.ClientHeaders(map[string][]string{}); err != nil {
		t.Fatal(err)
	}
	res := async(func() (map[string][]string, error) {
		return c.ServerHeaders(map[string][]string{"grpc-status": {"0"}}, true)
	})
	s := stream(t, fc)
	recvSent(t, s)
	clock.advance(2 * time.Millisecond)
	answerT(t, s, &Response{Kind: ResponseHeaders})
	if _, err := await(t, res); err != nil {
		t.Fatal(err)
	}
	want := []string{"client_headers 0s", "server_headers 2ms", "server_trailers 2ms"}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("recorded %q, want %q", got, want)
	}

	c, fc, _, rec = newMetricsTest(t, resources.ExtProcModes{RequestHeaders: true})
	res = async(func() (map[string][]string, error) { return c.ClientHeaders(map[string][]string{}) })
	s = stream(t, fc)
	recvSent(t, s)
	answerT(t, s, &Response{Immediate: &Immediate{Code: 7, Details: "no"}})
	if _, err := await(t, res); err == nil {
		t.Fatal("the immediate response did not fail the headers")
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("a failed event was measured: %q", got)
	}
}
