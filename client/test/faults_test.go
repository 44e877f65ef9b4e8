package test

import (
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Faults the client must survive, each end to end (the real client, the
// gRPC transport, a real server on 127.0.0.1) on SotW and on delta, each
// asserting the recovery time or the bound it proves. Every test checks that
// it leaves no goroutine behind (checkLeaks).

// recoveryBound is how long the client may take to be back in business once
// a server is reachable again. fastTransport's backoffs (the stream's and
// gRPC's connection backoff) cap at 50 ms, +20% jitter; the rest is slack
// for a starved -race run on two cores with every test in parallel.
const recoveryBound = 2 * time.Second

// requestLog records when a management server received requests of each
// type, from its hooks.
type requestLog struct {
	mu   sync.Mutex
	reqs []loggedRequest
}

type loggedRequest struct {
	at      time.Time
	typeURL string
}

func (l *requestLog) add(typeURL string) {
	l.mu.Lock()
	l.reqs = append(l.reqs, loggedRequest{time.Now(), typeURL})
	l.mu.Unlock()
}

// hooks returns server options that feed l.
func (l *requestLog) hooks() testutils.ManagementServerOptions {
	return testutils.ManagementServerOptions{
		OnStreamRequest: func(_ int64, r *discoveryv3.DiscoveryRequest) error {
			l.add(r.GetTypeUrl())
			return nil
		},
		OnDeltaRequest: func(_ int64, r *discoveryv3.DeltaDiscoveryRequest) error {
			l.add(r.GetTypeUrl())
			return nil
		},
	}
}

// allTypesSince waits until requests of every type in typeURLs arrived after
// since, and returns when the last of them did.
func (l *requestLog) allTypesSince(t *testing.T, since time.Time, typeURLs ...string) time.Time {
	t.Helper()
	var last time.Time
	waitFor(t, "the client to resubscribe every type", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		seen := map[string]time.Time{}
		for _, r := range l.reqs {
			if r.at.After(since) {
				if _, ok := seen[r.typeURL]; !ok {
					seen[r.typeURL] = r.at
				}
			}
		}
		last = time.Time{}
		for _, u := range typeURLs {
			at, ok := seen[u]
			if !ok {
				return false
			}
			if at.After(last) {
				last = at
			}
		}
		return true
	})
	return last
}

// Server killed and restarted with the same state: the client resubscribes
// everything within recoveryBound, keeps every value, delivers nothing again
// (nothing changed), and serves the next change.
func TestFaultServerRestartSameState(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			log := &requestLog{}
			e := newE2E(t, variant{name: p.name, p: p}, config{}, log.hooks(), svc(1001))
			tr := watchTree(e.c)
			tr.l.wantUpdate(t, "svc")
			tr.r.wantUpdate(t, "svc-route")
			tr.c.wantUpdate(t, "svc-cluster")
			tr.e.wantUpdate(t, "svc-cluster")

			// Counted from before the restart: the client may resubscribe
			// (and, in delta, be done) before restart returns.
			down := time.Now()
			e.restart(svc(1001))
			back := log.allTypesSince(t, down, ldsURL, rdsURL, cdsURL, edsURL)
			recovery := back.Sub(down)
			t.Logf("resubscribed every type %v after the restart began", recovery)
			if recovery > recoveryBound {
				t.Errorf("resubscribed %v after the restart began, want within %v", recovery, recoveryBound)
			}
			barrier(t, e.c)
			tr.l.nonePastOutage(t)
			tr.r.nonePastOutage(t)
			tr.c.nonePastOutage(t)
			tr.e.nonePastOutage(t)
			dump := e.c.Dump()
			if len(dump) != 4 {
				t.Errorf("the cache holds %d resources after the restart, want the 4 of the tree", len(dump))
			}
			for _, st := range dump {
				if st.Status != client.StatusACKed || st.Value == nil {
					t.Errorf("%s %s is %v after the restart, want ACKED with its value", st.TypeURL, st.Name, st.Status)
				}
			}

			// The new stream is live: a change arrives.
			changed := time.Now()
			e.update(svc(1002))
			wantAddresses(t, tr.e.wantUpdatePastOutage(t, "svc-cluster"), "127.0.0.1:1002")
			t.Logf("a change after the restart reached the watcher in %v", time.Since(changed))
		})
	}
}

// Server killed; while it is down its state changes: a Listener, a Cluster
// and its endpoints are deleted, a route and endpoints change. Once it is
// back the client converges on the new state, deletions included (over SotW
// a ClusterLoadAssignment cannot be deleted: it is kept, as TestE2EDelete
// says), within recoveryBound, and delivers nothing that did not change.
func TestFaultServerRestartWithChangesAndDeletions(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			before := testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: []string{"a", "b"}, Ports: []uint32{1001}})
			before.Listeners = append(before.Listeners, testutils.Listener("extra", "svc-route"))
			// fail_on_data_errors: deleted means dropped (gRFC A88).
			e := newE2E(t, variant{name: p.name, p: p}, config{features: failOnDataErrors}, testutils.ManagementServerOptions{}, before)
			ls := map[string]*recorder[*resources.Listener]{"svc": newRecorder[*resources.Listener](), "extra": newRecorder[*resources.Listener]()}
			cs := map[string]*recorder[*resources.Cluster]{"a": newRecorder[*resources.Cluster](), "b": newRecorder[*resources.Cluster]()}
			es := map[string]*recorder[*resources.Endpoints]{"a": newRecorder[*resources.Endpoints](), "b": newRecorder[*resources.Endpoints]()}
			route := newRecorder[*resources.RouteConfig]()
			for name, w := range ls {
				client.WatchListener(e.c, name, w)
				w.wantUpdate(t, name)
			}
			for name, w := range cs {
				client.WatchCluster(e.c, name, w)
				w.wantUpdate(t, name)
			}
			for name, w := range es {
				client.WatchEndpoints(e.c, name, w)
				w.wantUpdate(t, name)
			}
			client.WatchRouteConfig(e.c, "svc-route", route)
			route.wantUpdate(t, "svc-route")

			e.ms.Stop()
			after := testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: []string{"a"}, Ports: []uint32{2002}})
			e.start(after)
			up := time.Now()

			var last time.Time
			seen := func(at time.Time) {
				if at.After(last) {
					last = at
				}
			}
			ev := ls["extra"].nextPastOutage(t)
			if ev.kind != "resource-error" || !isNotFound(ev.err) {
				t.Fatalf("listener extra got %v, want its deletion", ev)
			}
			seen(ev.at)
			evc := cs["b"].nextPastOutage(t)
			if evc.kind != "resource-error" || !isNotFound(evc.err) {
				t.Fatalf("cluster b got %v, want its deletion", evc)
			}
			seen(evc.at)
			if p.delta {
				eve := es["b"].nextPastOutage(t)
				if eve.kind != "resource-error" || !isNotFound(eve.err) {
					t.Fatalf("endpoints b got %v, want their deletion", eve)
				}
				seen(eve.at)
			}
			evr := route.nextPastOutage(t)
			if evr.kind != "update" || !slices.Equal(evr.value.ClusterNames(), []string{"a"}) {
				t.Fatalf("route got %v, want it to send to a alone", evr)
			}
			seen(evr.at)
			eva := es["a"].nextPastOutage(t)
			if eva.kind != "update" {
				t.Fatalf("endpoints a got %v, want an update", eva)
			}
			wantAddresses(t, eva.value, "127.0.0.1:2002")
			seen(eva.at)
			converged := last.Sub(up)
			t.Logf("converged on the new state %v after the server came back", converged)
			if converged > recoveryBound {
				t.Errorf("converged %v after the server came back, want within %v", converged, recoveryBound)
			}

			// What did not change is not delivered again.
			barrier(t, e.c)
			ls["svc"].nonePastOutage(t)
			cs["a"].nonePastOutage(t)
			if !p.delta {
				es["b"].nonePastOutage(t)
			}
			want := map[string]client.Status{
				ldsURL + " svc": client.StatusACKed, ldsURL + " extra": client.StatusDoesNotExist,
				rdsURL + " svc-route": client.StatusACKed,
				cdsURL + " a":         client.StatusACKed, cdsURL + " b": client.StatusDoesNotExist,
				edsURL + " a": client.StatusACKed, edsURL + " b": client.StatusDoesNotExist,
			}
			if !p.delta {
				want[edsURL+" b"] = client.StatusACKed // SotW cannot delete it
			}
			got := map[string]client.Status{}
			for _, st := range e.c.Dump() {
				got[st.TypeURL+" "+st.Name] = st.Status
			}
			if !maps.Equal(got, want) {
				t.Fatalf("cache after the restart: %v, want %v", got, want)
			}
		})
	}
}

// The server moves to another port behind the same name: the client dials
// "xdsfault:///xds-server", a name a resolver maps to the server's address
// (grpc.WithResolvers through TransportOptions.DialOptions). The server on
// the old port dies, one on a new port starts with changed resources, the
// resolver is told; the client follows within recoveryBound and converges.
func TestFaultServerMovesBehindTheSameName(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			old := startManagementServer(t, svc(1001))
			r := manual.NewBuilderWithScheme("xdsfault")
			r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: old.Address()}}})
			c := newFaultClient(t, "xdsfault:///xds-server", p, func(o *client.Options) {
				o.TransportOptions.DialOptions = append(slices.Clone(fastTransport.DialOptions), grpc.WithResolvers(r))
			})
			tr := watchTree(c)
			tr.l.wantUpdate(t, "svc")
			tr.r.wantUpdate(t, "svc-route")
			tr.c.wantUpdate(t, "svc-cluster")
			wantAddresses(t, tr.e.wantUpdate(t, "svc-cluster"), "127.0.0.1:1001")

			old.Stop()
			moved := startManagementServer(t, svc(2002))
			if moved.Address() == old.Address() {
				t.Fatal("the new server got the old port")
			}
			told := time.Now()
			r.UpdateState(resolver.State{Addresses: []resolver.Address{{Addr: moved.Address()}}})
			ev := tr.e.nextPastOutage(t)
			if ev.kind != "update" {
				t.Fatalf("endpoints got %v after the move, want an update", ev)
			}
			wantAddresses(t, ev.value, "127.0.0.1:2002")
			followed := ev.at.Sub(told)
			t.Logf("converged on the moved server %v after the resolver update", followed)
			if followed > recoveryBound {
				t.Errorf("converged %v after the resolver update, want within %v", followed, recoveryBound)
			}
			if n := moved.Counters(); n.Streams+n.DeltaStreams == 0 {
				t.Fatal("the moved server saw no stream")
			}
			barrier(t, c)
			tr.l.nonePastOutage(t)
			tr.c.nonePastOutage(t)
		})
	}
}

func startManagementServer(t *testing.T, rs testutils.Resources) *testutils.ManagementServer {
	t.Helper()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	if err := ms.Update(testContext(t), nodeID, rs); err != nil {
		t.Fatal(err)
	}
	return ms
}
