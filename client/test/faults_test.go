package test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

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

// wireReq is one request a FakeStream received, of either protocol.
type wireReq struct {
	sotw  *discoveryv3.DiscoveryRequest
	delta *discoveryv3.DeltaDiscoveryRequest
}

func (r wireReq) nonce() string {
	if r.delta != nil {
		return r.delta.GetResponseNonce()
	}
	return r.sotw.GetResponseNonce()
}

// errorDetail is the message of the request's error_detail, and whether it
// has one: whether it is a NACK.
func (r wireReq) errorDetail() (string, bool) {
	if r.delta != nil {
		return r.delta.GetErrorDetail().GetMessage(), r.delta.GetErrorDetail() != nil
	}
	return r.sotw.GetErrorDetail().GetMessage(), r.sotw.GetErrorDetail() != nil
}

// readReq reads st's next request; it fails the test if none comes.
func readReq(t *testing.T, st *testutils.FakeStream) wireReq {
	t.Helper()
	r, err := tryReadReq(t, st)
	if err != nil {
		t.Fatalf("stream %d: waiting for a request: %v", st.ID, err)
	}
	return r
}

func tryReadReq(t *testing.T, st *testutils.FakeStream) (wireReq, error) {
	return tryReadReqWithin(t, st, timeout)
}

// readReqWithin is readReq with a deadline of its own.
func readReqWithin(t *testing.T, st *testutils.FakeStream, d time.Duration) wireReq {
	t.Helper()
	r, err := tryReadReqWithin(t, st, d)
	if err != nil {
		t.Fatalf("stream %d: waiting %v for a request: %v", st.ID, d, err)
	}
	return r
}

func tryReadReqWithin(t *testing.T, st *testutils.FakeStream, d time.Duration) (wireReq, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if st.Delta {
		r, err := st.NextDeltaRequest(ctx)
		return wireReq{delta: r}, err
	}
	r, err := st.NextRequest(ctx)
	return wireReq{sotw: r}, err
}

// sendCluster sends msg, a Cluster, as the one resource of a response on
// st: a SotW response at version, or a delta response of the resource at
// version.
func sendCluster(st *testutils.FakeStream, version, nonce string, msg proto.Message) error {
	name := msg.(interface{ GetName() string }).GetName()
	if st.Delta {
		return st.SendDelta(testutils.DeltaResponse(cdsURL, nonce, nil, testutils.WrapResource(name, version, 0, msg)))
	}
	return st.Send(testutils.SotWResponse(cdsURL, version, nonce, msg))
}

func mustSendCluster(t *testing.T, st *testutils.FakeStream, version, nonce string, msg proto.Message) {
	t.Helper()
	if err := sendCluster(st, version, nonce, msg); err != nil {
		t.Fatal(err)
	}
}

// wantACK reads the next request of st and checks it ACKs nonce.
func wantACK(t *testing.T, st *testutils.FakeStream, nonce string) {
	t.Helper()
	checkACK(t, readReq(t, st), nonce)
}

func checkACK(t *testing.T, r wireReq, nonce string) {
	t.Helper()
	if detail, nack := r.errorDetail(); nack || r.nonce() != nonce {
		t.Fatalf("reply (nonce %q, error_detail %q), want an ACK of %q", r.nonce(), detail, nonce)
	}
}

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
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(c, "C1", w)
			st := nextStreamOf(t, fs)
			readReq(t, st)
			mustSendCluster(t, st, "1", "n1", testutils.Cluster("C1", "eds-1"))
			wantACK(t, st, "n1")
			w.wantUpdate(t, "C1")

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
		Decode: func(body *anypb.Any) (string, *resources.Cluster, error) {
			decodes.Add(1)
			return resources.ClusterType.DecodeTyped(body)
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
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(c, "C1", w)
			st := nextStreamOf(t, fs)
			readReq(t, st)
			mustSendCluster(t, st, "1", "good", testutils.Cluster("C1", "eds-1"))
			wantACK(t, st, "good")
			w.wantUpdate(t, "C1")

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
