package test

import (
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Streams and reconnection, on both protocols.

// subscribedSet follows the requests of a stream (or of all, for per-type
// streams) until the names it has subscribed to, for each type of want, are
// want's: the names of the latest SotW request, or the delta subscriptions
// net of unsubscriptions, counted from the requests this call reads.
func subscribedSet(t *testing.T, st requestReader, delta bool, want map[string][]string) {
	t.Helper()
	got := make(map[string]map[string]bool)
	for !sameSets(got, want) {
		if delta {
			r, err := st.NextDeltaRequest(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			if got[r.TypeUrl] == nil {
				got[r.TypeUrl] = make(map[string]bool)
			}
			for _, n := range r.ResourceNamesSubscribe {
				got[r.TypeUrl][n] = true
			}
			for _, n := range r.ResourceNamesUnsubscribe {
				delete(got[r.TypeUrl], n)
			}
		} else {
			r, err := st.NextRequest(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			got[r.TypeUrl] = make(map[string]bool)
			for _, n := range r.ResourceNames {
				got[r.TypeUrl][n] = true
			}
		}
	}
}

func sameSets(got map[string]map[string]bool, want map[string][]string) bool {
	for typeURL, names := range want {
		if len(got[typeURL]) != len(names) {
			return false
		}
		for _, n := range names {
			if !got[typeURL][n] {
				return false
			}
		}
	}
	return true
}

// firstRequests reads a new stream's requests (or new streams', per type)
// until it has the first of each of n types, and returns the names each
// subscribes to.
func firstRequests(t *testing.T, st requestReader, delta bool, n int) map[string][]string {
	t.Helper()
	got := make(map[string][]string)
	for len(got) < n {
		var typeURL string
		var names []string
		if delta {
			r, err := st.NextDeltaRequest(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.ResourceNamesUnsubscribe) > 0 || r.ResponseNonce != "" {
				t.Fatalf("request %v on a new stream unsubscribes or replies", r)
			}
			typeURL, names = r.TypeUrl, r.ResourceNamesSubscribe
		} else {
			r, err := st.NextRequest(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			if r.ResponseNonce != "" {
				t.Fatalf("request %v on a new stream carries a nonce of the old one", r)
			}
			typeURL, names = r.TypeUrl, r.ResourceNames
		}
		if _, ok := got[typeURL]; !ok {
			got[typeURL] = slices.Sorted(slices.Values(names))
		}
	}
	return got
}

// A new stream resends every subscription of every type, wildcard
// included, each type in its first request, and nothing unsubscribed.
func TestReconnectResendsEverySubscription(t *testing.T) {
	t.Parallel()
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newFakeEnv(t, p, config{})
			client.WatchListener(e.c, "L1", newRecorder[*resources.Listener]())
			client.WatchListener(e.c, "L2", newRecorder[*resources.Listener]())
			client.WatchRouteConfig(e.c, "R1", newRecorder[*resources.RouteConfig]())
			client.WatchCluster(e.c, "C1", newRecorder[*resources.Cluster]())
			client.WatchCluster(e.c, resources.Wildcard, newRecorder[*resources.Cluster]())
			client.WatchEndpoints(e.c, "E1", newRecorder[*resources.Endpoints]())
			cancel := client.WatchEndpoints(e.c, "E2", newRecorder[*resources.Endpoints]())
			want := map[string][]string{
				ldsURL: {"L1", "L2"},
				rdsURL: {"R1"},
				cdsURL: {"*", "C1"},
				edsURL: {"E1", "E2"},
			}
			// ADS: one stream carries every type; per type, one each.
			var first requestReader = e.fs
			if !p.perType {
				first = e.nextStream()
			}
			subscribedSet(t, first, p.delta, want)
			cancel()
			if p.delta {
				r, err := first.NextDeltaRequest(testContext(t))
				if err != nil {
					t.Fatal(err)
				}
				wantReq(t, r, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResourceNamesUnsubscribe: []string{"E2"}})
			} else {
				subscribedSet(t, first, false, map[string][]string{edsURL: {"E1"}})
			}
			want[edsURL] = []string{"E1"}

			wantStreams := 1
			if p.perType {
				wantStreams = len(want)
			}
			if n := e.fs.StreamCount(); n != wantStreams {
				t.Fatalf("%d streams for four types, want %d", n, wantStreams)
			}
			var second requestReader = e.fs
			e.fs.CutStream(grpcstatus.Error(codes.Unavailable, "going away")) // each type's, per type
			if !p.perType {
				second = e.nextStream()
			}
			got := firstRequests(t, second, p.delta, len(want))
			for typeURL, names := range want {
				if !slices.Equal(got[typeURL], names) {
					t.Errorf("%s: the new stream subscribes to %q, want %q", typeURL, got[typeURL], names)
				}
			}
		})
	}
}

// While the server is unreachable the client keeps what it has: watchers
// are told once, keep their values, and a new watcher of a cached resource
// gets it. Once the server is back, the client resubscribes and serves its
// updates.
func TestUnreachableServerKeepsLastKnownConfig(t *testing.T) {
	t.Parallel()
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newFakeEnv(t, p, config{})
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(e.c, "C1", w)
			e.reply(p)
			e.respond(p, cdsURL, "1", cluster("C1", "1", 0))
			e.reply(p)
			w.wantUpdate(t, "C1")
			addr := e.fs.Address()
			e.fs.Stop()

			w.wantError(t, "ambient-error", client.ErrServerUnavailable, "C1")
			w2 := newRecorder[*resources.Cluster]()
			client.WatchCluster(e.c, "C1", w2)
			w2.wantUpdate(t, "C1")
			if st, _ := status(e.c, cdsURL, "C1"); st.Value == nil || st.Status != client.StatusACKed {
				t.Fatalf("dump %+v while the server is away, want the value kept", st)
			}

			fs := startFake(t, addr)
			e2 := &fakeEnv{t: t, fs: fs, c: e.c}
			e2.reply(p)
			e2.respond(p, cdsURL, "2", testutils.WrapResource("C1", "2", 0, testutils.Cluster("C1", "eds-2")))
			e2.reply(p)
			if c := w.wantUpdate(t, "C1"); c.EDSServiceName() != "eds-2" {
				t.Fatalf("after the reconnect C1 has EDS name %q, want eds-2", c.EDSServiceName())
			}
			barrier(t, e.c)
			w.none(t) // told once per outage, however many attempts failed
		})
	}
}

// Reconnection attempts are spread by jitter: with a fixed base delay and
// ±50% jitter, some attempt comes sooner than the base delay, which no
// amount of scheduling noise can cause (noise only adds).
func TestReconnectBackoffHasJitter(t *testing.T) {
	t.Parallel()
	fs := startFake(t, "")
	const base = 20 * time.Millisecond
	b, err := bootstrapFor(fs.Address(), sotw, config{})
	if err != nil {
		t.Fatal(err)
	}
	topts := fastTransport
	topts.Backoff = backoff.Config{BaseDelay: base, Multiplier: 1, Jitter: 0.5, MaxDelay: base}
	c, err := client.New(b, client.Options{WatchExpiry: noExpiry, TransportOptions: topts, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	client.WatchListener(c, "L1", newRecorder[*resources.Listener]())
	var prev time.Time
	var gaps []time.Duration
	for range 30 {
		st, err := fs.NextStream(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		if !prev.IsZero() {
			gaps = append(gaps, st.Opened.Sub(prev))
		}
		prev = st.Opened
		// Failing without a response keeps the backoff from resetting.
		st.Cut(grpcstatus.Error(codes.Unavailable, "not now"))
	}
	if m := slices.Min(gaps); m >= base*85/100 {
		t.Fatalf("shortest of %d gaps between attempts is %v: no jitter below the %v base delay", len(gaps), m, base)
	}
}
