package test

import (
	"errors"
	"fmt"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// The SotW exchange, request by request, through the real client: watch →
// request → response → decode → verdict → ACK/NACK → watcher events.

// sotwListenerEnv is a SotW client watching Listener L1, whose first
// request has been checked.
func sotwListenerEnv(t *testing.T, p protocol, cfg config) (*fakeEnv, *recorder[*resources.Listener]) {
	t.Helper()
	e := newFakeEnv(t, p, cfg)
	w := newRecorder[*resources.Listener]()
	client.WatchListener(e.c, "L1", w)
	// The first request carries the node, and no version on a new client.
	wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{Node: wantNode, TypeUrl: ldsURL, ResourceNames: []string{"L1"}})
	return e, w
}

func TestSotWFirstRequestAndACK(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e, w := sotwListenerEnv(t, sotw, config{})
		e.send(sotwResp(ldsURL, "1", testutils.Listener("L1", "R1")))
		// ACK: the response's version and nonce, the names, no node.
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "1", ResourceNames: []string{"L1"}, ResponseNonce: "n1"})
		if l := w.wantUpdate(t, "L1"); l.RouteConfigName != "R1" {
			t.Fatalf("listener routes to %q, want R1", l.RouteConfigName)
		}
		// Every response gets its reply, with the latest nonce.
		e.send(sotwResp(ldsURL, "2", testutils.Listener("L1", "R2")))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "2", ResourceNames: []string{"L1"}, ResponseNonce: "n2"})
		if l := w.wantUpdate(t, "L1"); l.RouteConfigName != "R2" {
			t.Fatalf("listener routes to %q, want R2", l.RouteConfigName)
		}
	})
}

func TestSotWNACKKeepsAcceptedVersionAndSetsErrorDetail(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e, w := sotwListenerEnv(t, sotw, config{})
		// Rejected before anything was accepted: the version stays empty and
		// the watcher learns the resource is unusable.
		e.send(sotwResp(ldsURL, "1", testutils.Listener("L1", "")))
		wantNACK(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, ResourceNames: []string{"L1"}, ResponseNonce: "n1"},
			`"L1"`, "route_config_name")
		w.wantError(t, "resource-error", client.ErrResourceInvalid, "L1")

		e.send(sotwResp(ldsURL, "2", testutils.Listener("L1", "R1")))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "2", ResourceNames: []string{"L1"}, ResponseNonce: "n2"})
		w.wantUpdate(t, "L1")

		// Rejected after version 2: the NACK carries version 2, not 3, and the
		// watcher keeps its value (an ambient error).
		e.send(sotwResp(ldsURL, "3", testutils.Listener("L1", "")))
		wantNACK(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "2", ResourceNames: []string{"L1"}, ResponseNonce: "n3"},
			`"L1"`, "route_config_name")
		w.wantError(t, "ambient-error", client.ErrResourceInvalid, "L1")
		if st, _ := status(e.c, ldsURL, "L1"); st.Status != client.StatusNACKed || st.Version != "2" || st.Value == nil {
			t.Fatalf("dump %+v, want NACKED still serving version 2", st)
		}
		// A new watcher gets the last good value, then the rejection.
		w2 := newRecorder[*resources.Listener]()
		client.WatchListener(e.c, "L1", w2)
		if l := w2.wantUpdate(t, "L1"); l.RouteConfigName != "R1" {
			t.Fatalf("new watcher got a listener routing to %q, want the last good R1", l.RouteConfigName)
		}
		w2.wantError(t, "ambient-error", client.ErrResourceInvalid, "L1")

		e.send(sotwResp(ldsURL, "4", testutils.Listener("L1", "R4")))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "4", ResourceNames: []string{"L1"}, ResponseNonce: "n4"})
		w.wantUpdate(t, "L1")
	})
}

// Every request lists every name still wanted, with the accepted version and
// the latest nonce; the last unsubscription sends an empty list.
func TestSotWSubscriptionAddAndRemove(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e, w1 := sotwListenerEnv(t, sotw, config{})
		e.send(sotwResp(ldsURL, "1", testutils.Listener("L1", "R1")))
		e.req() // ACK
		w1.wantUpdate(t, "L1")

		cancel2 := client.WatchListener(e.c, "L2", newRecorder[*resources.Listener]())
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "1", ResourceNames: []string{"L1", "L2"}, ResponseNonce: "n1"})

		// Second watchers of L1 and L2 share the subscriptions: they come and
		// go without a request, so the next one is the ACK of version 2, still
		// naming both.
		cancel2b := client.WatchListener(e.c, "L2", newRecorder[*resources.Listener]())
		cancel2b()
		cancel1 := client.WatchListener(e.c, "L1", w1) // L1 has two watchers now
		w1.wantUpdate(t, "L1")                         // the cached value, at once
		cancel1()
		if st, _ := status(e.c, ldsURL, "L1"); st.Watchers != 1 {
			t.Fatalf("L1 has %d watchers, want 1", st.Watchers)
		}
		e.send(sotwResp(ldsURL, "2", testutils.Listener("L1", "R1"), testutils.Listener("L2", "R2")))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "2", ResourceNames: []string{"L1", "L2"}, ResponseNonce: "n2"})

		cancel2()
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "2", ResourceNames: []string{"L1"}, ResponseNonce: "n2"})
		if _, ok := status(e.c, ldsURL, "L2"); ok {
			t.Fatal("L2 still cached after its last watcher left")
		}
	})
}

func TestSotWUnsubscribeAllSendsEmptyList(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e := newFakeEnv(t, sotw, config{})
		cancel := client.WatchCluster(e.c, "C1", newRecorder[*resources.Cluster]())
		e.req()
		e.send(sotwResp(cdsURL, "1", testutils.Cluster("C1", "")))
		e.req()
		cancel()
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "1", ResponseNonce: "n1"})
	})
}

// A request does not wait for the response to the previous one: the server
// may answer only the latest.
func TestSotWRequestsDoNotWaitForResponses(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e, w1 := sotwListenerEnv(t, sotw, config{})
		w2 := newRecorder[*resources.Listener]()
		client.WatchListener(e.c, "L2", w2)
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, ResourceNames: []string{"L1", "L2"}})
		e.send(sotwResp(ldsURL, "1", testutils.Listener("L1", "R1"), testutils.Listener("L2", "R2")))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "1", ResourceNames: []string{"L1", "L2"}, ResponseNonce: "n1"})
		w1.wantUpdate(t, "L1")
		w2.wantUpdate(t, "L2")
	})
}

// Each type is its own sub-stream, with its own version and nonce.
func TestSotWTypesKeepTheirOwnVersionAndNonce(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e, _ := sotwListenerEnv(t, sotw, config{})
		client.WatchRouteConfig(e.c, "R1", newRecorder[*resources.RouteConfig]())
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{Node: sotw.nodeOfNewType(), TypeUrl: rdsURL, ResourceNames: []string{"R1"}})
		e.send(testutils.SotWResponse(ldsURL, "l1", "ln1", testutils.Listener("L1", "R1")))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "l1", ResourceNames: []string{"L1"}, ResponseNonce: "ln1"})
		e.send(testutils.SotWResponse(rdsURL, "r1", "rn1", testutils.RouteConfig("R1", "*", "C1")))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: rdsURL, VersionInfo: "r1", ResourceNames: []string{"R1"}, ResponseNonce: "rn1"})
		client.WatchRouteConfig(e.c, "R2", newRecorder[*resources.RouteConfig]())
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: rdsURL, VersionInfo: "r1", ResourceNames: []string{"R1", "R2"}, ResponseNonce: "rn1"})
	})
}

func TestSotWDuplicateNamesAreNACKed(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e, w := sotwListenerEnv(t, sotw, config{})
		e.send(sotwResp(ldsURL, "1", testutils.Listener("L1", "R1"), testutils.Listener("L1", "R2")))
		wantNACK(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, ResourceNames: []string{"L1"}, ResponseNonce: "n1"},
			`"L1"`, "more than once")
		w.wantError(t, "resource-error", client.ErrResourceInvalid, "L1")
	})
}

// A resource whose type_url is not the response's is rejected; the rest of
// the response still applies.
func TestSotWTypeURLMismatchIsNACKed(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e, w := sotwListenerEnv(t, sotw, config{})
		e.send(sotwResp(ldsURL, "1", testutils.Listener("L1", "R1"), testutils.Cluster("L2", "")))
		wantNACK(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, ResourceNames: []string{"L1"}, ResponseNonce: "n1"},
			"type_url", cdsURL)
		w.wantUpdate(t, "L1")
	})
}

// Resources nobody asked for are ignored: no NACK, nothing cached.
func TestSotWIgnoresResourcesNotAskedFor(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e, w := sotwListenerEnv(t, sotw, config{})
		e.send(sotwResp(ldsURL, "1", testutils.Listener("L1", "R1"), testutils.Listener("other", "R2")))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "1", ResourceNames: []string{"L1"}, ResponseNonce: "n1"})
		w.wantUpdate(t, "L1")
		if _, ok := status(e.c, ldsURL, "other"); ok {
			t.Fatal("a listener nobody asked for was cached")
		}
	})
}

// Resources wrapped in discovery.v3.Resource are unwrapped.
func TestSotWWrappedResourceIsUnwrapped(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e, w := sotwListenerEnv(t, sotw, config{})
		e.send(sotwResp(ldsURL, "1", testutils.WrapResource("L1", "v7", 0, testutils.Listener("L1", "R1"))))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "1", ResourceNames: []string{"L1"}, ResponseNonce: "n1"})
		if l := w.wantUpdate(t, "L1"); l.RouteConfigName != "R1" {
			t.Fatalf("unwrapped listener routes to %q, want R1", l.RouteConfigName)
		}
	})
}

// Listener and Cluster responses are the whole world: one previously
// received and now missing is deleted, and an empty response deletes all.
// RouteConfiguration and ClusterLoadAssignment responses may be partial:
// absence deletes nothing.
func TestSotWWholeWorldDeletionVersusPartialAbsence(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e := newFakeEnv(t, sotw, config{features: []string{bootstrap.FeatureFailOnDataErrors}}) // deleted means dropped (gRFC A88)
		l1, l2 := newRecorder[*resources.Listener](), newRecorder[*resources.Listener]()
		r1, r2 := newRecorder[*resources.RouteConfig](), newRecorder[*resources.RouteConfig]()
		client.WatchListener(e.c, "L1", l1)
		client.WatchListener(e.c, "L2", l2)
		client.WatchRouteConfig(e.c, "R1", r1)
		client.WatchRouteConfig(e.c, "R2", r2)
		e.reqsNaming(map[string][]string{ldsURL: {"L1", "L2"}, rdsURL: {"R1", "R2"}})

		e.send(sotwResp(ldsURL, "1", testutils.Listener("L1", "R1"), testutils.Listener("L2", "R2")))
		e.req()
		l1.wantUpdate(t, "L1")
		l2.wantUpdate(t, "L2")
		e.send(sotwResp(ldsURL, "2", testutils.Listener("L1", "R1")))
		e.req()
		l2.wantNotFound(t, "L2")

		e.send(sotwResp(rdsURL, "1", testutils.RouteConfig("R1", "*", "C1"), testutils.RouteConfig("R2", "*", "C2")))
		e.req()
		r1.wantUpdate(t, "R1")
		r2.wantUpdate(t, "R2")
		e.send(sotwResp(rdsURL, "2", testutils.RouteConfig("R1", "*", "C9")))
		e.req()
		r1.wantUpdate(t, "R1")
		e.send(sotwResp(rdsURL, "3"))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: rdsURL, VersionInfo: "3", ResourceNames: []string{"R1", "R2"}, ResponseNonce: "n3"})
		barrier(t, e.c)
		r1.none(t)
		r2.none(t)
		l1.none(t)
		if st, _ := status(e.c, rdsURL, "R2"); st.Status != client.StatusACKed || st.Value == nil {
			t.Fatalf("R2 dump %+v, want still ACKED with its value", st)
		}

		e.send(sotwResp(ldsURL, "3"))
		e.req()
		l1.wantNotFound(t, "L1")
	})
}

// gRFC A88: without fail_on_data_errors, a Listener the server deletes is
// kept. Its watchers get an ambient error (ErrResourceNotFound) once,
// however often the server omits it; it is DOES_NOT_EXIST with its value in
// the dump; every response is ACKed. ignore_resource_deletion (gRFC A53,
// deprecated by A88) changes nothing.
func TestSotWDeletionKeptWithoutFailOnDataErrors(t *testing.T) {
	t.Parallel()
	for _, features := range [][]string{nil, {bootstrap.FeatureIgnoreResourceDeletion}} {
		t.Run(fmt.Sprint(features), func(t *testing.T) {
			forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
				t.Parallel()
				e := newFakeEnv(t, sotw, config{features: features})
				w := newRecorder[*resources.Listener]()
				client.WatchListener(e.c, "L1", w)
				client.WatchListener(e.c, "L2", newRecorder[*resources.Listener]())
				e.reqsNaming(map[string][]string{ldsURL: {"L1", "L2"}})
				e.send(sotwResp(ldsURL, "1", testutils.Listener("L1", "R1"), testutils.Listener("L2", "R2")))
				e.req()
				w.wantUpdate(t, "L1")
				e.send(sotwResp(ldsURL, "2", testutils.Listener("L2", "R2")))
				e.send(sotwResp(ldsURL, "3"))
				e.req()
				wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "3", ResourceNames: []string{"L1", "L2"}, ResponseNonce: "n3"})
				w.wantError(t, "ambient-error", client.ErrResourceNotFound, "L1")
				barrier(t, e.c)
				w.none(t)
				if st, _ := status(e.c, ldsURL, "L1"); st.Status != client.StatusDoesNotExist || st.Value == nil {
					t.Fatalf("L1 dump %+v, want DOES_NOT_EXIST with the value kept", st)
				}
			})
		})
	}
}

// The wildcard alone is the legacy form, an empty list, which every server
// understands; beside names it is the name "*"; once names have gone out, it
// stays explicit (see TestSotWWildcardForms in the transport for every
// transition).
func TestSotWWildcard(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e := newFakeEnv(t, sotw, config{features: []string{bootstrap.FeatureFailOnDataErrors}}) // deleted means dropped (gRFC A88)
		ww := newRecorder[*resources.Cluster]()
		cancelWild := client.WatchCluster(e.c, resources.Wildcard, ww)
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{Node: wantNode, TypeUrl: cdsURL})
		e.send(sotwResp(cdsURL, "1", testutils.Cluster("A", ""), testutils.Cluster("B", "")))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "1", ResponseNonce: "n1"})
		got := map[string]bool{ww.next(t).value.Name: true, ww.next(t).value.Name: true}
		if !got["A"] || !got["B"] {
			t.Fatalf("wildcard watcher got %v, want A and B", got)
		}
		wc := newRecorder[*resources.Cluster]()
		cancelC := client.WatchCluster(e.c, "C", wc)
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "1", ResourceNames: []string{"*", "C"}, ResponseNonce: "n1"})
		// B leaves the world: the wildcard watcher is told.
		e.send(sotwResp(cdsURL, "2", testutils.Cluster("A", ""), testutils.Cluster("C", "")))
		e.req()
		wc.wantUpdate(t, "C")
		events := []event[*resources.Cluster]{ww.next(t), ww.next(t)}
		var sawC, sawBGone bool
		for _, ev := range events {
			switch {
			case ev.kind == "update" && ev.value.Name == "C":
				sawC = true
			case ev.kind == "resource-error":
				var xe *client.Error
				sawBGone = errors.As(ev.err, &xe) && xe.Name == "B"
			}
		}
		if !sawC || !sawBGone {
			t.Fatalf("wildcard watcher got %v, want C's update and B's deletion", events)
		}
		cancelWild()
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "2", ResourceNames: []string{"C"}, ResponseNonce: "n2"})
		cancelC()
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "2", ResponseNonce: "n2"})
	})
}

// After the stream breaks, the new stream's first request of each type
// carries the last accepted version (none for a type whose only response
// was rejected), every name, and no nonce; the node comes again.
func TestSotWReconnectResubscribesWithLastVersions(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, sotw protocol) {
		t.Parallel()
		e := newFakeEnv(t, sotw, config{})
		lw := newRecorder[*resources.Listener]()
		rw := newRecorder[*resources.RouteConfig]()
		client.WatchListener(e.c, "L1", lw)
		client.WatchCluster(e.c, "C1", newRecorder[*resources.Cluster]())
		client.WatchRouteConfig(e.c, "R1", rw)
		first := e.nextStream()
		for range 3 {
			e.req()
		}
		e.send(sotwResp(ldsURL, "7", testutils.Listener("L1", "R1")))
		e.req()
		lw.wantUpdate(t, "L1")
		e.send(sotwResp(cdsURL, "3", &clusterv3.Cluster{Name: "C1"}))
		e.req() // NACK

		// Over ADS the new stream carries every type, the node on its first
		// request; per type, each type has a new stream of its own.
		var second requestReader = e.fs
		if sotw.perType {
			e.fs.CutStream(grpcstatus.Error(codes.Unavailable, "going away")) // each type's stream
		} else {
			first.Cut(grpcstatus.Error(codes.Unavailable, "going away"))
			second = e.nextStream()
		}
		got := map[string]*discoveryv3.DiscoveryRequest{}
		for i := range 3 {
			r, err := second.NextRequest(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			if (i == 0 || sotw.perType) != (r.Node != nil) {
				t.Fatalf("request %d of the new stream has node %v: want it on the first of each stream only", i, r.Node)
			}
			if r.Node != nil {
				wantReq(t, r.Node, wantNode)
				r.Node = nil
			}
			got[r.TypeUrl] = r
		}
		wantReq(t, got[ldsURL], &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "7", ResourceNames: []string{"L1"}})
		wantReq(t, got[cdsURL], &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1"}})
		wantReq(t, got[rdsURL], &discoveryv3.DiscoveryRequest{TypeUrl: rdsURL, ResourceNames: []string{"R1"}})

		// A stream that ends after responses is routine (gRFC A57): watchers
		// are not told, and keep their values.
		barrier(t, e.c)
		lw.none(t)
		rw.none(t)
		// The server resends the same listener: nothing new for the watcher.
		e.send(sotwResp(ldsURL, "7", testutils.Listener("L1", "R1")))
		if _, err := second.NextRequest(testContext(t)); err != nil {
			t.Fatal(err)
		}
		barrier(t, e.c)
		lw.none(t)
	})
}
