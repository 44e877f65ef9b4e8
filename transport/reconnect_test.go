package transport_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// After a stream breaks, the new stream resends every subscription with the
// last accepted versions; nonces are not carried over.
func TestSotWReconnectResubscribesWithLastVersions(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		e := newEnv(t, sotw, fastOptions, nil)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		e.next()
		e.tr.UpdateSubscriptions(rdsURL, []string{"R1"}, nil)
		e.next()
		e.fs.Send(testutils.SotWResponse(ldsURL, "lv1", "ln1"))
		e.next()
		e.h.setVerdict(func(*transport.Response) error { return errRejected })
		e.fs.Send(testutils.SotWResponse(rdsURL, "rv1", "rn1"))
		e.next() // NACK: RDS has no accepted version
		e.fs.CutStream(status.Error(codes.Unavailable, "going away"))
		if err := e.h.nextStreamErr(t); !strings.Contains(err.Error(), "going away") {
			t.Fatalf("stream error %v", err)
		}
		got := map[string]*discoveryv3.DiscoveryRequest{}
		for range 2 {
			r := e.next()
			got[r.TypeUrl] = r
		}
		if perType(sotw) {
			// Each type has a new stream of its own, started by the node.
			for _, r := range got {
				want(t, r.Node, testNode)
				r.Node = nil
			}
		} else {
			node := got[ldsURL].GetNode()
			if node == nil {
				node = got[rdsURL].GetNode()
				got[rdsURL].Node = nil
			} else {
				got[ldsURL].Node = nil
			}
			want(t, node, testNode)
		}
		want(t, got[ldsURL], &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "lv1", ResourceNames: []string{"L1"}})
		want(t, got[rdsURL], &discoveryv3.DiscoveryRequest{TypeUrl: rdsURL, ResourceNames: []string{"R1"}})
	})
}

// A server that fails every stream without answering pushes the client into
// exponential backoff: after each failure the client waits, on its clock,
// for a timer due at the next delay.
func TestBackoffGrowsWhileServerNeverAnswers(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
		opts := transport.Options{
			Backoff:           backoff.Config{BaseDelay: 40 * time.Millisecond, Multiplier: 2, MaxDelay: time.Second},
			MinStreamInterval: time.Millisecond,
			Clock:             clk,
		}
		e := newEnv(t, sotw, opts, nil)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		// Delays 40, 80, 160 ms (no jitter configured).
		waitStarts(t, e, clk, []time.Duration{40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond},
			func(st *testutils.FakeStream) { st.Cut(status.Error(codes.Unavailable, "no")) })
	})
}

// A server that answers once and hangs up resets the backoff each time, but
// the minimum interval between stream starts still bounds the reconnect
// rate: no hot loop. The client waits for MinStreamInterval from the last
// start, not for its 1 ms backoff.
func TestAnswerOnceAndHangUpIsBoundedByMinInterval(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
		opts := transport.Options{
			Backoff:           backoff.Config{BaseDelay: time.Millisecond, Multiplier: 1, MaxDelay: time.Millisecond},
			MinStreamInterval: 100 * time.Millisecond,
			Clock:             clk,
		}
		e := newEnv(t, sotw, opts, nil)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		waitStarts(t, e, clk, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
			func(st *testutils.FakeStream) {
				if _, err := st.NextRequest(ctxT(t)); err != nil {
					t.Fatal(err)
				}
				st.Send(testutils.SotWResponse(ldsURL, "v1", "n1"))
				if _, err := st.NextRequest(ctxT(t)); err != nil { // the ACK
					t.Fatal(err)
				}
				st.Cut(nil)
			})
	})
}

// waitStarts takes len(delays)+1 streams from the server, ending each with
// end, and checks that after stream i ends the client waits to start the
// next for a timer due delays[i] after that stream started: the fake clock
// stands still while a stream runs, so its start is the clock's time when
// it ends. The timer is waited for before the clock moves, so a client
// that started sooner, or waited on a shorter timer, fails the test.
func waitStarts(t *testing.T, e *env, clk *testutils.FakeClock, delays []time.Duration, end func(*testutils.FakeStream)) {
	t.Helper()
	for i := 0; ; i++ {
		st, err := e.fs.NextStream(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		started := clk.Now()
		end(st)
		if i == len(delays) {
			return
		}
		if err := clk.WaitForTimerAt(ctxT(t), started.Add(delays[i])); err != nil {
			t.Fatalf("after stream %d ended, the client did not wait %v to start the next: %v", i+1, delays[i], err)
		}
		if n := e.fs.StreamCount(); n != i+1 {
			t.Fatalf("%d streams started while the client waited %v after stream %d", n, delays[i], i+1)
		}
		clk.Advance(delays[i])
	}
}

// A server that accepts the stream and never says anything is given up on
// after the silence timeout, and the stream restarted.
func TestSilentServerStreamIsRestarted(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		opts := fastOptions
		opts.SilenceTimeout = 100 * time.Millisecond
		e := newEnv(t, sotw, opts, nil)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		first, err := e.fs.NextStream(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.h.nextStreamErr(t); !strings.Contains(err.Error(), "no response") {
			t.Fatalf("stream error %v, want the silence", err)
		}
		second, err := e.fs.NextStream(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if gap := second.Opened.Sub(first.Opened); gap < 100*time.Millisecond {
			t.Fatalf("restarted after %v, before the 100ms silence timeout", gap)
		}
	})
}

// With no server at all, failures are reported and retried until Close.
func TestUnreachableServerReportsErrors(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		e := newEnv(t, sotw, fastOptions, nil)
		e.fs.Stop()
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		for range 2 {
			if err := e.h.nextStreamErr(t); err == nil || errors.Is(err, nil) {
				t.Fatal("nil stream error")
			}
		}
	})
}

// A server that keeps resending a response the client rejects gets its
// NACKs later and later: every response still gets its reply, but a NACK
// loop cannot spin.
func TestRepeatedNACKsArePaced(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		opts := fastOptions
		opts.NACKBackoff = backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 2, MaxDelay: 10 * time.Second}
		e := newEnv(t, sotw, opts, nil)
		e.h.setVerdict(func(*transport.Response) error { return errRejected })
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		e.next()
		var sentAt, nackedAt []time.Time
		for i := range 4 {
			sentAt = append(sentAt, time.Now())
			e.fs.Send(testutils.SotWResponse(ldsURL, "v1", fmt.Sprint("n", i)))
			r := e.next()
			nackedAt = append(nackedAt, time.Now())
			if r.GetErrorDetail() == nil || r.ResponseNonce != fmt.Sprint("n", i) {
				t.Fatalf("reply %d is %v, want a NACK of n%d", i, r, i)
			}
		}
		// The first NACK is immediate; repeats are held ~100, 200, 400 ms.
		for i, min := range []time.Duration{0, 100, 200, 400} {
			held := nackedAt[i].Sub(sentAt[i])
			if held < min*time.Millisecond*9/10 {
				t.Errorf("NACK %d held %v, want at least %vms", i, held, min)
			}
		}
		// A different response is judged afresh, and replied to at once.
		e.h.setVerdict(nil)
		start := time.Now()
		e.fs.Send(testutils.SotWResponse(ldsURL, "v2", "n9"))
		if r := e.next(); r.GetErrorDetail() != nil || r.VersionInfo != "v2" {
			t.Fatalf("reply %v, want an ACK of v2", r)
		}
		// Had the pacing carried over, this reply would be held 800 ms.
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("ACK after a NACK run took %v: the NACK pacing leaked into it", d)
		}
	})
}
