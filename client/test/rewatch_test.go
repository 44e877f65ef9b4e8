package test

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// A watch cancelled and opened again at once gets the resource. The last
// cancel queues the unsubscription; a watch before it is flushed cancels it
// out, so the server is told nothing and believes the client still holds
// the resource. The client used to forget the resource at the cancel all the
// same, and the new watcher waited forever. Against go-control-plane, many
// times over, so that the flush falls on either side of the new watch.
//
// Wildcard watches only over SotW: once the removal of "*" has gone out,
// go-control-plane's delta server keeps its record of what it sent through
// the wildcard, and does not send unchanged resources again when "*" is
// subscribed anew, though the protocol wants a subscription answered. And
// against its linear cache: a wildcard watched again after the removal went
// out is an explicit "*" (the legacy form is over on that stream), which the
// snapshot cache answers with nothing, filtering by the literal name
// (envoyproxy/go-control-plane#558).
func TestRewatchRightAfterCancel(t *testing.T) {
	t.Parallel()
	type watch struct {
		name   string
		linear bool
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			watches := []watch{{"svc-cluster", false}}
			if !p.delta {
				watches = append(watches, watch{resources.Wildcard, true})
			}
			for _, wt := range watches {
				ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{Linear: wt.linear})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(ms.Stop)
				if err := ms.Update(testContext(t), nodeID, svc(1001)); err != nil {
					t.Fatal(err)
				}
				c := newFaultClient(t, ms.Address(), p, nil)
				w := newRecorder[*resources.Cluster]()
				cancel := client.WatchCluster(c, wt.name, w)
				w.wantUpdate(t, "svc-cluster")
				for range 20 {
					cancel()
					w = newRecorder[*resources.Cluster]()
					cancel = client.WatchCluster(c, wt.name, w)
					w.wantUpdate(t, "svc-cluster")
				}
				cancel()
			}
		})
	}
}

// The same, on the wire. Watched again before the flush, nothing goes out
// and the new watcher gets the cached value at once. Watched again after the
// flush, when the cache has forgotten it, the removal goes out first, then
// the subscription, even if the transport had not sent the removal yet (see
// the transport's TestResubscribeAfterUnsentRemovalReachesTheServer), and
// the server sends it again.
func TestRewatchRightAfterCancelOnTheWire(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			e := newFakeEnv(t, p, config{})
			cancel := client.WatchCluster(e.c, "C1", newRecorder[*resources.Cluster]())
			e.reply(p)
			e.respond(p, cdsURL, "1", cluster("C1", "1", 0))
			e.reply(p)

			// Before the flush: from a callback, which the flush, queued on
			// the same serializer, cannot overtake.
			w := newRecorder[*resources.Cluster]()
			rewatched := make(chan struct{})
			e.c.WatchResource("type.googleapis.com/goxds.test.Rewatch", "x", client.WatcherFuncs[resources.Resource]{
				OnResourceError: func(error) {
					cancel()
					cancel = client.WatchCluster(e.c, "C1", w)
					close(rewatched)
				},
			})
			select {
			case <-rewatched:
			case <-time.After(timeout):
				t.Fatal("the callback that cancels and watches again never ran")
			}
			w.wantUpdate(t, "C1")
			// The next request is C2's subscription: nothing went out for C1.
			client.WatchCluster(e.c, "C2", newRecorder[*resources.Cluster]())
			if p.delta {
				wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"C2"}})
			} else {
				wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"C1", "C2"}, ResponseNonce: "1"})
			}

			// After the flush.
			cancel()
			barrier(t, e.c) // the flush was queued before the barrier
			if _, ok := status(e.c, cdsURL, "C1"); ok {
				t.Fatal("C1 still cached once its removal was flushed")
			}
			w = newRecorder[*resources.Cluster]()
			client.WatchCluster(e.c, "C1", w)
			if p.delta {
				wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesUnsubscribe: []string{"C1"}})
				wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"C1"}})
			} else {
				wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"C2"}, ResponseNonce: "1"})
				wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"C1", "C2"}, ResponseNonce: "1"})
			}
			e.respond(p, cdsURL, "2", testutils.WrapResource("C1", "1", 0, testutils.Cluster("C1", "")))
			e.reply(p)
			w.wantUpdate(t, "C1")
		})
	}
}

// gatedHandler holds the transport's receive loop once the client has
// applied the response with nonce gate, until release is closed: the
// client has judged that response, the transport has not yet recorded its
// nonce.
type gatedHandler struct {
	transport.Handler
	gate    string
	held    chan struct{} // closed once the gated response is applied
	release chan struct{}
}

func (h *gatedHandler) OnResponse(r *transport.Response, done func()) error {
	err := h.Handler.OnResponse(r, done)
	if r.Nonce == h.gate {
		close(h.held)
		<-h.release
	}
	return err
}

type gatedBuilder struct {
	transport.Builder
	h *gatedHandler
}

func (b gatedBuilder) Build(server bootstrap.ServerConfig, node *corev3.Node, h transport.Handler) (transport.Transport, error) {
	b.h.Handler = h
	return b.Builder.Build(server, node, b.h)
}

// TestRewatchRightAfterCancel's failure, made deterministic: a watcher gets
// a resource from response 2, and is cancelled and replaced while the
// transport has not yet recorded nonce 2 (the client has applied response 2,
// the transport's receive loop has not yet taken the verdict). The removal,
// flushed, forgets the resource; the removal and the new subscription must
// not go out with nonce 1, which a server that has sent 2 ignores
// (go-control-plane does): the ACK of 2 would then name the resource, and the
// server, believing the client holds it from 2, would never send it again.
// They go out with nonce 2, after the ACK of 2 (which names the resource, as
// the client did when 2 arrived), and the server sends the resource again.
// For a name and for the wildcard.
func TestRewatchWhileResponseIsJudged(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"C1", resources.Wildcard} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			testRewatchWhileResponseIsJudged(t, name)
		})
	}
}

func testRewatchWhileResponseIsJudged(t *testing.T, name string) {
	fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Stop)
	b, err := bootstrapFor(fs.Address(), sotw, config{})
	if err != nil {
		t.Fatal(err)
	}
	h := &gatedHandler{gate: "2", held: make(chan struct{}), release: make(chan struct{})}
	c, err := client.New(b, client.Options{WatchExpiry: noExpiry, Logger: testLogger(),
		TransportBuilder: gatedBuilder{Builder: transport.NewBuilder(fastTransport), h: h}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &fakeEnv{t: t, fs: fs, c: c}
	released := false
	release := func() {
		if !released {
			released = true
			close(h.release)
		}
	}
	t.Cleanup(release) // runs before Close: a failed test must not leave the loop held

	// How the requests name it: the wildcard alone goes out in the legacy
	// form (an empty list) until a request named something; its removal
	// then names "*" first (see transport/wildcard.go).
	named := []string{name}
	req := func(version, nonce string, names []string) *discoveryv3.DiscoveryRequest {
		return &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: version, ResourceNames: names, ResponseNonce: nonce}
	}
	first := req("", "", named)
	first.Node = wantNode
	if name == resources.Wildcard {
		first.ResourceNames = nil
	}

	w := newRecorder[*resources.Cluster]()
	cancel := client.WatchCluster(c, name, w)
	wantReq(t, e.req(), first)
	e.respond(sotw, cdsURL, "1", cluster("C1", "1", 0))
	ack := req("v1", "1", named)
	if name == resources.Wildcard {
		ack.ResourceNames = nil
	}
	wantReq(t, e.req(), ack)
	w.wantUpdate(t, "C1")

	// Removed and wanted again, after the removal was flushed: the removal
	// goes out, then the subscription.
	cancel()
	barrier(t, c)
	w = newRecorder[*resources.Cluster]()
	cancel = client.WatchCluster(c, name, w)
	if name == resources.Wildcard {
		wantReq(t, e.req(), req("v1", "1", named)) // the legacy form ends
	}
	wantReq(t, e.req(), req("v1", "1", nil))
	wantReq(t, e.req(), req("v1", "1", named))
	e.respond(sotw, cdsURL, "2", cluster("C1", "1", 0))
	select {
	case <-h.held:
	case <-time.After(timeout):
		t.Fatal("response 2 never applied")
	}
	w.wantUpdate(t, "C1")

	// Again, while response 2 is applied and nonce 2 not yet recorded.
	cancel()
	barrier(t, c) // the removal is flushed: C1 is forgotten
	w = newRecorder[*resources.Cluster]()
	client.WatchCluster(c, name, w)
	barrier(t, c) // the subscription is flushed
	// A Listener watch: its request proves that the transport has been
	// through the changes of both types since (one pass sends every type,
	// Clusters first); no Cluster request went out before it.
	client.WatchListener(c, "L1", newRecorder[*resources.Listener]())
	wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, ResourceNames: []string{"L1"}})
	release()
	// The ACK of 2 names what was asked for when 2 arrived; the removal and
	// the new subscription follow, each on its own (see
	// transport/sotw.go, request).
	wantReq(t, e.req(), req("v2", "2", named))
	wantReq(t, e.req(), req("v2", "2", nil))
	wantReq(t, e.req(), req("v2", "2", named))
	e.respond(sotw, cdsURL, "3", cluster("C1", "1", 0))
	wantReq(t, e.req(), req("v3", "3", named))
	w.wantUpdate(t, "C1")
	barrier(t, c)
	w.none(t)
}
