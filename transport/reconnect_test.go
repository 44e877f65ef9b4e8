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
// exponential backoff.
func TestBackoffGrowsWhileServerNeverAnswers(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		opts := transport.Options{
			Backoff:           backoff.Config{BaseDelay: 40 * time.Millisecond, Multiplier: 2, MaxDelay: time.Second},
			MinStreamInterval: time.Millisecond,
		}
		e := newEnv(t, sotw, opts, nil)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		var starts []time.Time
		for range 4 {
			st, err := e.fs.NextStream(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			starts = append(starts, st.Opened)
			st.Cut(status.Error(codes.Unavailable, "no"))
		}
		// Delays ~40, 80, 160 ms (no jitter configured).
		checkStartGaps(t, starts, []time.Duration{40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond})
	})
}

// A server that answers once and hangs up resets the backoff each time, but
// the minimum interval between stream starts still bounds the reconnect
// rate: no hot loop.
func TestAnswerOnceAndHangUpIsBoundedByMinInterval(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		opts := transport.Options{
			Backoff:           backoff.Config{BaseDelay: time.Millisecond, Multiplier: 1, MaxDelay: time.Millisecond},
			MinStreamInterval: 100 * time.Millisecond,
		}
		e := newEnv(t, sotw, opts, nil)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		var starts []time.Time
		for range 4 {
			st, err := e.fs.NextStream(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			starts = append(starts, st.Opened)
			if _, err := st.NextRequest(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			st.Send(testutils.SotWResponse(ldsURL, "v1", "n1"))
			if _, err := st.NextRequest(ctxT(t)); err != nil { // the ACK
				t.Fatal(err)
			}
			st.Cut(nil)
		}
		checkStartGaps(t, starts, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond})
	})
}

// The fake server reads a stream's start when its handler runs, which the
// scheduler may delay by tens of milliseconds under -race on a loaded
// 2-core machine; the client enforces its gaps on its own clock. So each gap
// seen at the server may fall short of its floor by up to half of it, which
// still fails a reconnect loop by orders of magnitude, and the span from the
// first start to the last, whose noise does not add up across gaps, may fall
// short of the sum of the floors by spanNoise only.
const spanNoise = 50 * time.Millisecond

// checkStartGaps asserts that the streams, as the server saw them open,
// started about floors[i] apart or more, and at least the sum of the floors
// from the first to the last: the reconnect rate is bounded.
func checkStartGaps(t *testing.T, starts []time.Time, floors []time.Duration) {
	t.Helper()
	var total time.Duration
	for i, floor := range floors {
		total += floor
		if gap := starts[i+1].Sub(starts[i]); gap < floor/2 {
			t.Errorf("stream %d started %v after the previous one, want ≥ %v", i+2, gap, floor)
		}
	}
	if span := starts[len(floors)].Sub(starts[0]); span < total-spanNoise {
		t.Errorf("streams 1 to %d started within %v, want ≥ %v", len(floors)+1, span, total)
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
