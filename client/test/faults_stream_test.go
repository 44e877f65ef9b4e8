package test

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Faults of a single stream, played by the scriptable fake server: resets,
// silence, blackholes, hang-ups and NACK loops.

// The stream is reset after a response and before its ACK reached the
// server. The client has applied the response: it is delivered once, and the
// new stream, started at once since the old one was healthy, says the client
// holds it (SotW: version_info; delta: initial_resource_versions) with no
// nonce of the old stream. The server's resend of it is ACKed and not
// delivered again; the next change is.
func TestFaultStreamResetBeforeACK(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			fs := startFake(t, "")
			c := newFaultClient(t, fs.Address(), p, nil)
			w, st := watchServedC1(t, c, fs, "n1")

			mustSendCluster(t, st, "2", "n2", testutils.Cluster("C1", "eds-2"))
			st.Cut(grpcstatus.Error(codes.Unavailable, "connection reset"))
			cut := time.Now()
			if c := w.wantUpdate(t, "C1"); c.EDSServiceName() != "eds-2" {
				t.Fatalf("C1 has EDS name %q, want eds-2", c.EDSServiceName())
			}

			st2 := nextStreamOf(t, fs)
			first := readReq(t, st2)
			restarted := st2.Opened.Sub(cut)
			t.Logf("new stream %v after the reset", restarted)
			if restarted > recoveryBound {
				t.Errorf("new stream %v after the reset, want within %v", restarted, recoveryBound)
			}
			if p.delta {
				wantReq(t, first.delta, &discoveryv3.DeltaDiscoveryRequest{Node: wantNode, TypeUrl: cdsURL,
					ResourceNamesSubscribe: []string{"C1"}, InitialResourceVersions: map[string]string{"C1": "2"}})
			} else {
				wantReq(t, first.sotw, &discoveryv3.DiscoveryRequest{Node: wantNode, TypeUrl: cdsURL,
					VersionInfo: "2", ResourceNames: []string{"C1"}})
			}
			// The server never saw the ACK and resends version 2.
			mustSendCluster(t, st2, "2", "n3", testutils.Cluster("C1", "eds-2"))
			wantACK(t, st2, "n3")
			mustSendCluster(t, st2, "3", "n4", testutils.Cluster("C1", "eds-3"))
			wantACK(t, st2, "n4")
			if c := w.wantUpdate(t, "C1"); c.EDSServiceName() != "eds-3" {
				t.Fatalf("C1 has EDS name %q, want eds-3", c.EDSServiceName())
			}
			barrier(t, c)
			w.none(t) // no outage: the stream that ended had answered
		})
	}
}

// nextStreamOf waits for the next stream the client opens on fs.
func nextStreamOf(t *testing.T, fs *testutils.FakeServer) *testutils.FakeStream {
	t.Helper()
	st, err := fs.NextStream(testContext(t))
	if err != nil {
		t.Fatalf("waiting for a stream: %v", err)
	}
	return st
}

// A server that accepts the stream and never answers: the watchdog
// (TransportOptions.SilenceTimeout) restarts the stream after the silence,
// no sooner, and no later than the silence plus the backoff. The watcher
// hears once that the server is unavailable. Once the server answers the
// client recovers, and the watchdog no longer restarts the stream: a quiet
// server that has answered is within its rights.
func TestFaultSilentServer(t *testing.T) {
	t.Parallel()
	const silence = 200 * time.Millisecond
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			fs := startFake(t, "")
			m := &metrics{}
			c := newFaultClient(t, fs.Address(), p, func(o *client.Options) {
				o.TransportOptions.SilenceTimeout = silence
				o.Metrics = m
			})
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(c, "C1", w)
			var opened []time.Time
			for range 4 {
				st := nextStreamOf(t, fs)
				readReq(t, st) // the subscription, never answered
				opened = append(opened, st.Opened)
			}
			// The backoff grows with each silent stream, but fastBackoff
			// caps it at 50 ms, +20% jitter.
			maxGap := silence + fastBackoff.MaxDelay*6/5 + recoveryBound
			// The server reads each start when its handler runs, which a
			// loaded machine may delay by tens of milliseconds, so one gap
			// may look up to half the silence short; over the three gaps
			// that noise does not add up, and the span must hold three
			// silences but for one delay.
			var gaps []time.Duration
			for i := 1; i < len(opened); i++ {
				gap := opened[i].Sub(opened[i-1])
				gaps = append(gaps, gap)
				if gap < silence/2 || gap > maxGap {
					t.Errorf("stream %d started %v after the previous one, want between %v and %v", i+1, gap, silence, maxGap)
				}
			}
			if span, want := opened[len(opened)-1].Sub(opened[0]), 3*silence-silence/2; span < want {
				t.Errorf("streams 1 to 4 started within %v, want at least %v (three silences less one delay)", span, want)
			}
			t.Logf("silent streams restarted after %v", gaps)
			ev := w.wantError(t, "resource-error", client.ErrServerUnavailable, "C1")
			if !strings.Contains(ev.err.Error(), "no response") {
				t.Errorf("watcher told %v, want it to say the server did not respond", ev.err)
			}
			barrier(t, c)
			w.none(t) // told once, however many streams stayed silent

			// The server answers, on whichever stream is current by then.
			st := answerCluster(t, fs, "1", testutils.Cluster("C1", "eds-1"))
			w.wantUpdate(t, "C1")
			if _, _, _, failures, connected := m.counts(); failures != 1 || !slices.Equal(connected, []bool{true}) {
				t.Errorf("metrics: %d server failures, connected %v; want 1 failure, then connected", failures, connected)
			}
			n := fs.StreamCount()
			time.Sleep(3 * silence) // a window of quiet: the watchdog must not restart an answered stream
			if fs.StreamCount() != n {
				t.Fatalf("the stream was restarted although the server had answered")
			}
			select {
			case <-st.Done():
				t.Fatal("the answered stream ended")
			default:
			}
		})
	}
}

// answerCluster answers the client's subscription with msg on the current
// stream and waits for the ACK; if the watchdog restarted the stream
// meanwhile, it answers on the next one.
func answerCluster(t *testing.T, fs *testutils.FakeServer, version string, msg proto.Message) *testutils.FakeStream {
	t.Helper()
	for i := 0; ; i++ {
		st := nextStreamOf(t, fs)
		if fs.StreamCount() > st.ID {
			continue // a later stream is already open
		}
		if _, err := tryReadReq(t, st); err != nil {
			continue
		}
		nonce := fmt.Sprint("answer-", i)
		if err := sendCluster(st, version, nonce, msg); err != nil {
			continue
		}
		if r, err := tryReadReq(t, st); err == nil && r.nonce() == nonce {
			return st
		}
	}
}

// A server that accepts connections and never says a word, not even
// HTTP/2's: no stream ever starts. gRPC's connect timeout (1 s in
// fastTransport) fails the attempt; the watcher hears once that the server
// is unavailable, and once the server behaves, the client is back within
// recoveryBound.
func TestFaultBlackholedServer(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			fs := startFake(t, "")
			fs.SetBlackhole(true)
			c := newFaultClient(t, fs.Address(), p, nil)
			w := newRecorder[*resources.Cluster]()
			watched := time.Now()
			client.WatchCluster(c, "C1", w)
			ev := w.wantError(t, "resource-error", client.ErrServerUnavailable, "C1")
			t.Logf("outage reported %v after the watch", ev.at.Sub(watched))
			if fs.StreamCount() != 0 {
				t.Fatal("a stream reached the black-holed server")
			}
			released := time.Now()
			fs.SetBlackhole(false)
			answerCluster(t, fs, "1", testutils.Cluster("C1", "eds-1"))
			ev = w.nextPastOutage(t)
			if ev.kind != "update" {
				t.Fatalf("got %v, want C1", ev)
			}
			back := ev.at.Sub(released)
			t.Logf("recovered %v after the server behaved", back)
			if back > recoveryBound {
				t.Errorf("recovered %v after the server behaved, want within %v", back, recoveryBound)
			}
		})
	}
}

// A server that answers once and hangs up, again and again: every stream
// is healthy, so the backoff resets, but TransportOptions.MinStreamInterval
// still bounds the reconnect rate. The watcher gets the resource once (it
// never changes) and no error: a stream that ended after answering is no
// outage, and the metrics say so.
//
// The pace is read on a fake clock (TransportOptions.Clock) rather than on
// the times the server sees streams open, which a loaded machine shifts by
// tens of milliseconds either way: after each hang-up the client must hold
// a timer due one interval after the stream's start, and must not start
// the next stream until the clock has reached it. Without the bound no
// timer would be set and the streams would follow each other at once.
func TestFaultAnswerOnceAndHangUp(t *testing.T) {
	t.Parallel()
	const (
		minInterval = 100 * time.Millisecond
		streams     = 6
	)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			fs := startFake(t, "")
			m := &metrics{}
			clock := testutils.NewFakeClock(time.Unix(1_000_000, 0))
			c := newFaultClient(t, fs.Address(), p, func(o *client.Options) {
				o.TransportOptions.MinStreamInterval = minInterval
				o.TransportOptions.Clock = clock
				o.Metrics = m
			})
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(c, "C1", w)
			ctx := testContext(t)
			for i := range streams {
				st := nextStreamOf(t, fs)
				// The stream started at the clock's present: the clock
				// moves only when the test moves it.
				due := clock.Now().Add(minInterval)
				readReq(t, st)
				nonce := fmt.Sprint("n", st.ID)
				mustSendCluster(t, st, "1", nonce, testutils.Cluster("C1", "eds-1"))
				wantACK(t, st, nonce)
				st.Cut(nil) // hang up, status OK
				if err := clock.WaitForTimerAt(ctx, due); err != nil {
					t.Fatalf("after stream %d ended: no timer due one MinStreamInterval (%v) after its start: %v", i+1, minInterval, err)
				}
				// The client waits on that timer: no stream can have
				// started meanwhile.
				if n := fs.StreamCount(); n != i+1 {
					t.Fatalf("%d streams started before the clock reached the interval, want %d", n, i+1)
				}
				if i < streams-1 {
					clock.Advance(minInterval)
				}
			}
			w.wantUpdate(t, "C1")
			barrier(t, c)
			w.none(t)
			responses, valid, invalid, failures, connected := m.counts()
			if responses != streams || valid != streams || invalid != 0 {
				t.Errorf("metrics: %d responses, %d valid, %d invalid resources; want %d, %d, 0", responses, valid, invalid, streams, streams)
			}
			if failures != 0 || !slices.Equal(connected, []bool{true}) {
				t.Errorf("metrics: %d server failures, connected %v; want none, and connected once", failures, connected)
			}
		})
	}
}

// countingTypes are the built-in types, with the Cluster decoder counting
// its calls.
func countingTypes(decodes *atomic.Int64) []resources.AnyType {
	counting := resources.NewType(resources.TypeOptions[*resources.Cluster]{
		TypeURL:                    resources.ClusterTypeURL,
		TypeName:                   resources.ClusterType.TypeName(),
		AllResourcesRequiredInSotW: resources.ClusterType.AllResourcesRequiredInSotW(),
		SupportsWildcard:           resources.ClusterType.SupportsWildcard(),
		Decode: func(ctx *resources.DecodeContext, body *anypb.Any) (string, *resources.Cluster, error) {
			decodes.Add(1)
			return resources.ClusterType.DecodeTyped(ctx, body)
		},
	})
	var out []resources.AnyType
	for _, typ := range resources.Registered() {
		if typ.TypeURL() == resources.ClusterTypeURL {
			typ = counting
		}
		out = append(out, typ)
	}
	return out
}

// A server that NACK-loops: it answers every NACK by sending the same
// rejected resource again, at once. The client keeps replying, every
// response gets its NACK, but identical NACKs are paced
// (TransportOptions.NACKBackoff): the n-th repeat is held base·2^(n-1), so a
// window holds a logarithmic number of them. The rejected bytes are decoded
// once, however often they come; the watcher is told once; the last good
// value stays. A fixed resource is then accepted at once.
func TestFaultNACKLoop(t *testing.T) {
	t.Parallel()
	// The default pacing (100 ms doubling) halved, to keep the test short.
	nackBackoff := backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 2, Jitter: 0.2, MaxDelay: 30 * time.Second}
	const window = time.Second
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			fs := startFake(t, "")
			m := &metrics{}
			var decodes atomic.Int64
			c := newFaultClient(t, fs.Address(), p, func(o *client.Options) {
				o.TransportOptions.NACKBackoff = nackBackoff
				o.ResourceTypes = countingTypes(&decodes)
				o.Metrics = m
			})
			w, st := watchServedC1(t, c, fs, "good")

			// The loop runs in its own goroutine: a held NACK blocks it.
			var nacks atomic.Int64
			var stop atomic.Bool
			var holds []time.Duration // guarded by the loop until loopDone
			loopDone := make(chan error, 1)
			go func() {
				for i := 1; ; i++ {
					nonce := fmt.Sprint("bad-", i)
					sent := time.Now()
					if err := sendCluster(st, "2", nonce, badCluster("C1")); err != nil {
						loopDone <- err
						return
					}
					r, err := tryReadReq(t, st)
					if err != nil {
						loopDone <- err
						return
					}
					if detail, nack := r.errorDetail(); !nack || r.nonce() != nonce || !strings.Contains(detail, `"C1"`) {
						loopDone <- fmt.Errorf("reply to %s: nonce %q, error_detail %q; want a NACK naming C1", nonce, r.nonce(), detail)
						return
					}
					holds = append(holds, time.Since(sent))
					nacks.Add(1)
					if stop.Load() {
						loopDone <- nil
						return
					}
				}
			}()
			time.Sleep(window)
			inWindow := nacks.Load()
			stop.Store(true)
			if err := <-loopDone; err != nil {
				t.Fatal(err)
			}
			// Nominal NACK times 0, 50, 150, 350, 750, 1550 ms: 5 in the
			// window, 6 with the worst jitter (-20%): 0, 40, 120, 280, 600,
			// 1240. An unpaced loop runs thousands.
			t.Logf("NACK loop: %d NACKs in the first %v (%.1f/s); holds %v", inWindow, window, float64(inWindow)/window.Seconds(), holds)
			if inWindow > 5 || inWindow < 3 {
				t.Errorf("%d NACKs in %v, want 3 to 5: paced, but still answered", inWindow, window)
			}
			for i, h := range holds[1:] {
				if min := time.Duration(float64(nackBackoff.BaseDelay) * float64(int(1)<<i) * 0.8); h < min {
					t.Errorf("repeat %d held %v, want at least %v", i+1, h, min)
				}
			}
			if n := decodes.Load(); n != 2 {
				t.Errorf("%d decodes during the loop, want 2: the good version and the bad one, once", n)
			}
			w.wantError(t, "ambient-error", client.ErrResourceInvalid, "C1")
			barrier(t, c)
			w.none(t) // told once
			if st, _ := status(c, cdsURL, "C1"); st.Status != client.StatusNACKed || st.Version != "1" || st.Value == nil {
				t.Errorf("dump %+v, want NACKED still serving version 1", st)
			}

			// A fixed resource is judged afresh and ACKed at once.
			fixed := time.Now()
			mustSendCluster(t, st, "3", "fixed", testutils.Cluster("C1", "eds-3"))
			wantACK(t, st, "fixed")
			if d := time.Since(fixed); d > recoveryBound {
				t.Errorf("the fixed version was ACKed %v after it was sent: the pacing leaked into it", d)
			}
			t.Logf("fixed version ACKed %v after it was sent", time.Since(fixed))
			if c := w.wantUpdate(t, "C1"); c.EDSServiceName() != "eds-3" {
				t.Fatalf("C1 has EDS name %q, want eds-3", c.EDSServiceName())
			}
			// Every response was counted, each bad one as one invalid
			// resource.
			bad := int(nacks.Load())
			if responses, valid, invalid, _, _ := m.counts(); responses != bad+2 || valid != 2 || invalid != bad {
				t.Errorf("metrics: %d responses, %d valid, %d invalid; want %d, 2, %d", responses, valid, invalid, bad+2, bad)
			}
			if n := decodes.Load(); n != 3 {
				t.Errorf("%d decodes, want 3", n)
			}
		})
	}
}
