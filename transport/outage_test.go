package transport_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/backoff"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// After a real outage (the server stopped, its port closed, then a server
// started again on the same port) the stream comes back within goxds's own
// backoff of the server's return, not after gRPC's connect backoff on top of
// it: the channel, left to itself, waits out a backoff of its own that grew
// through the outage (1 s growing by 1.6× to 120 s), and a stream opened
// fail-fast in that wait fails at once, so the two delays used to add up
// (3.5–8 s after a 20 s outage, with a backoff of 200–500 ms here).
//
// The outages are real time, so the subtests run in parallel: ~20 s in all.
// The bound leaves the backoff (at most 500 ms +20%) a second of slack for
// a loaded machine; the delay measured is logged.
func TestStreamBackWithinBackoffAfterOutage(t *testing.T) {
	opts := transport.Options{
		Backoff:           backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
		MinStreamInterval: time.Millisecond,
	}
	const bound = 1500 * time.Millisecond
	for _, c := range []struct {
		name   string
		api    bootstrap.APIType
		outage time.Duration
	}{
		{"ads/6s", bootstrap.APITypeAggregatedGRPC, 6 * time.Second},
		{"ads/20s", bootstrap.APITypeAggregatedGRPC, 20 * time.Second},
		{"per-type/6s", bootstrap.APITypeGRPC, 6 * time.Second},
		{"delta-per-type/20s", bootstrap.APITypeDeltaGRPC, 20 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(fs.Stop)
			h := newHandler()
			// Room for every failure of the outage: the handler must not
			// hold the runner up.
			h.streamErrs = make(chan error, 10000)
			server := bootstrap.ServerConfig{
				ServerURI:    fs.Address(),
				ChannelCreds: []bootstrap.ChannelCreds{{Type: bootstrap.CredsInsecure}},
				APIType:      c.api,
			}
			tr, err := transport.NewBuilder(opts).Build(server, testNode, h)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(tr.Close)
			tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
			if _, err := fs.NextStream(ctxT(t)); err != nil {
				t.Fatal(err)
			}

			fs.Stop()
			h.nextStreamErr(t)
			// The outage itself: the time the server is away is what the
			// test is about, not a wait for an event.
			time.Sleep(c.outage)
			// Every attempt of the outage was reported, not only the
			// first: waiting for the channel is bounded (the cycle is at
			// most the 600 ms backoff and the wait), so there were five
			// at least.
			if n := len(h.streamErrs); n < 3 {
				t.Errorf("%d stream errors reported during a %v outage after the first, want one per attempt", n, c.outage)
			}
			back, err := testutils.StartFakeServer(testutils.FakeServerOptions{Address: fs.Address()})
			if err != nil {
				t.Fatalf("restarting the server on %s: %v", fs.Address(), err)
			}
			returned := time.Now()
			t.Cleanup(back.Stop)
			// Wait well past the bound, so that a failure says how late
			// the stream was.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			st, err := back.NextStream(ctx)
			if err != nil {
				t.Fatalf("no stream within 60 s of the server's return: %v", err)
			}
			delay := st.Opened.Sub(returned)
			t.Logf("after a %v outage, the stream was back %v after the server", c.outage, delay)
			if delay > bound {
				t.Errorf("after a %v outage, the stream was back %v after the server, want within %v (the backoff is 200–500 ms)", c.outage, delay, bound)
			}
		})
	}
}
