package test

import (
	"errors"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// TTLs: over both protocols with the fake server (go-control-plane sends no
// TTL over delta), and over SotW with go-control-plane's heartbeating
// snapshot cache.

const ttl = 200 * time.Millisecond

// hbTTL is the TTL of the heartbeat test: long enough that a starved test
// process (-race, two cores, every test in parallel) still gets a heartbeat
// in time.
const hbTTL = 500 * time.Millisecond

// A resource whose TTL runs out is removed, with the server gone: that is
// what TTLs are for. The watcher learns it does not exist.
func TestTTLExpiryWithServerGone(t *testing.T) {
	t.Parallel()
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newFakeEnv(t, p, config{})
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(e.c, "C1", w)
			e.reply(p)
			e.respond(p, cdsURL, "1", cluster("C1", "1", ttl))
			e.reply(p)
			w.wantUpdate(t, "C1")
			e.fs.Stop()
			// The outage may be reported first; the expiry must follow.
			ev := w.next(t)
			if ev.kind == "ambient-error" {
				ev = w.next(t)
			}
			if ev.kind != "resource-error" || !isNotFound(ev.err) {
				t.Fatalf("got %v, want the TTL expiry", ev)
			}
			if st, _ := status(e.c, cdsURL, "C1"); st.Status != client.StatusDoesNotExist || st.Value != nil {
				t.Fatalf("dump %+v, want DOES_NOT_EXIST with no value", st)
			}
		})
	}
}

// The TTL timer is reset when the resource arrives with a TTL (a heartbeat
// included), and removed when it arrives without one. A heartbeat is ACKed
// and is not an update. The timers run on a fake clock.
func TestTTLResetAndRemoved(t *testing.T) {
	t.Parallel()
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
			e := newFakeEnv(t, p, config{clock: clk})
			recs := map[string]*recorder[*resources.Cluster]{}
			for _, name := range []string{"plain-later", "heartbeat"} {
				recs[name] = newRecorder[*resources.Cluster]()
				client.WatchCluster(e.c, name, recs[name])
				e.reply(p)
			}
			e.respond(p, cdsURL, "1", cluster("plain-later", "1", ttl), cluster("heartbeat", "1", ttl))
			e.reply(p) // read once the response is applied
			for name, w := range recs {
				w.wantUpdate(t, name)
			}
			if n := clk.Pending(); n != 2 {
				t.Fatalf("%d timers pending, want the two TTLs", n)
			}
			clk.Advance(ttl / 2)
			// Resent without a TTL; refreshed by a heartbeat with a longer
			// one.
			e.respond(p, cdsURL, "2",
				testutils.WrapResource("plain-later", "1", 0, testutils.Cluster("plain-later", "")),
				testutils.WrapResource("heartbeat", "1", time.Hour, nil))
			e.reply(p)
			reqs := e.fs.Requests()
			if ack := reqs[len(reqs)-1]; ack.SotW.GetErrorDetail() != nil || ack.Delta.GetErrorDetail() != nil {
				t.Fatalf("the response with a heartbeat was NACKed: %v", ack)
			}
			if n := clk.Pending(); n != 1 {
				t.Fatalf("%d timers pending, want only the heartbeat's new TTL", n)
			}

			// Past the first TTLs: both stay.
			clk.Advance(ttl)
			barrier(t, e.c)
			recs["plain-later"].none(t)
			recs["heartbeat"].none(t)
			for _, name := range []string{"plain-later", "heartbeat"} {
				if st, _ := status(e.c, cdsURL, name); st.Status != client.StatusACKed || st.Value == nil {
					t.Errorf("%s: dump %+v, want still ACKED", name, st)
				}
			}

			// The heartbeat's TTL, counted from the heartbeat, ends it.
			clk.Advance(time.Hour - ttl - time.Nanosecond)
			barrier(t, e.c)
			recs["heartbeat"].none(t)
			clk.Advance(time.Nanosecond)
			recs["heartbeat"].wantNotFound(t, "heartbeat")
			barrier(t, e.c)
			recs["plain-later"].none(t)
		})
	}
}

// A SotW wrapper may leave its version out (go-control-plane's do): the
// resource's version is then the response's version_info, and a heartbeat
// at that version is ACKed. (Regression: heartbeats were compared with the
// wrapper's empty version and NACKed, so TTLs were never refreshed.)
func TestSotWHeartbeatWithoutWrapperVersionIsACKed(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e := newFakeEnv(t, sotw, config{})
		w := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, "C1", w)
		e.req()
		e.send(sotwResp(cdsURL, "1", testutils.WrapResource("C1", "", time.Hour, testutils.Cluster("C1", ""))))
		e.req()
		w.wantUpdate(t, "C1")
		e.send(testutils.SotWResponse(cdsURL, "1", "hb", testutils.WrapResource("C1", "", time.Hour, nil)))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "1", ResourceNames: []string{"C1"}, ResponseNonce: "hb"})
		barrier(t, e.c)
		w.none(t)
	})
}

// go-control-plane's heartbeating snapshot cache (SotW): heartbeats keep a
// TTL'd cluster alive for several TTLs, are ACKed, are not updates, and do
// not delete the clusters they leave out (they hold only those with a TTL).
// When the server stops, the TTL'd cluster expires and the other stays.
//
// go-control-plane answers the ACK of a heartbeat with a full response
// (the heartbeat's resources replace what it thinks the client has), so A
// arrives every few tens of milliseconds, with or without a body. On a
// starved machine the server may still go quiet for longer than the TTL;
// A's expiry is then legitimate, and the test says so instead of failing.
func TestTTLHeartbeatsFromManagementServer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sentA []time.Time // when the server sent A, heartbeat or not
	heartbeats := make(chan time.Time, 1000)
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{
		HeartbeatInterval: hbTTL / 10,
		OnStreamResponse: func(_ int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
			if resp.GetTypeUrl() != cdsURL {
				return
			}
			now := time.Now()
			for _, a := range resp.GetResources() {
				if env, err := resources.Unwrap(a); err == nil && env.Name == "A" {
					mu.Lock()
					sentA = append(sentA, now)
					mu.Unlock()
					if env.IsHeartbeat() {
						select {
						case heartbeats <- now:
						default:
						}
					}
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	rs := testutils.Resources{Clusters: []*clusterv3.Cluster{testutils.Cluster("A", ""), testutils.Cluster("B", "")}}
	rs.TTLs = map[testutils.ResourceKey]time.Duration{{TypeURL: cdsURL, Name: "A"}: hbTTL}
	if err := ms.Update(testContext(t), nodeID, rs); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, ms.Address(), sotw, config{})
	wa, wb := newRecorder[*resources.Cluster](), newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "A", wa)
	client.WatchCluster(c, "B", wb)
	wa.wantUpdate(t, "A")
	wb.wantUpdate(t, "B")
	since := time.Now()

	// Wait for heartbeats spanning two TTLs.
	for at := since; at.Sub(since) < 2*hbTTL; {
		select {
		case at = <-heartbeats:
		case <-time.After(timeout):
			t.Fatal("no heartbeat")
		}
	}
	barrier(t, c)
	wb.none(t) // never deleted by a heartbeat that leaves it out
	mu.Lock()
	times := append([]time.Time(nil), sentA...)
	mu.Unlock()
	if quiet := longestGap(append(times, time.Now())); quiet > hbTTL*2/3 {
		t.Logf("the server was quiet for %v, near the %v TTL: not checking that A stayed", quiet, hbTTL)
		for len(wa.events) > 0 {
			<-wa.events
		}
	} else {
		wa.none(t) // heartbeats are not updates, and A did not expire
		if n := ms.Counters().NACKs; n != 0 {
			t.Fatalf("the client NACKed %d responses; heartbeats must be ACKed", n)
		}
	}

	if st, _ := status(c, cdsURL, "A"); st.Value == nil {
		return // expired in a quiet spell, and not sent again yet
	}
	ms.Stop()
	for ev := wa.next(t); ev.kind != "resource-error" || isUnavailable(ev); ev = wa.next(t) {
		if ev.kind == "update" {
			t.Fatalf("A got %v after the server stopped, want its expiry", ev)
		}
	}
	if st, _ := status(c, cdsURL, "B"); st.Status != client.StatusACKed {
		t.Fatalf("B, which has no TTL, is %v after the server stopped, want kept ACKED", st.Status)
	}
}

// longestGap is the longest time between consecutive times of ts.
func longestGap(ts []time.Time) time.Duration {
	var longest time.Duration
	for i := 1; i < len(ts); i++ {
		longest = max(longest, ts[i].Sub(ts[i-1]))
	}
	return longest
}

func isNotFound(err error) bool { return errors.Is(err, client.ErrResourceNotFound) }
