package test

import (
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
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
