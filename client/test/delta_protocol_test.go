package test

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// The delta exchange, request by request, through the real client.

// deltaResp is a delta response with nonce, and a system_version_info that
// must not matter.
func deltaResp(nonce string, removed []string, rs ...*discoveryv3.Resource) *discoveryv3.DeltaDiscoveryResponse {
	r := testutils.DeltaResponse(cdsURL, nonce, removed, rs...)
	r.SystemVersionInfo = "system-" + nonce
	return r
}

// deltaClusterEnv is a delta client watching Cluster C1, whose first
// request has been checked.
func deltaClusterEnv(t *testing.T, p protocol, cfg config) (*fakeEnv, *recorder[*resources.Cluster]) {
	t.Helper()
	e := newFakeEnv(t, p, cfg)
	w := newRecorder[*resources.Cluster]()
	client.WatchCluster(e.c, "C1", w)
	wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{Node: wantNode, TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"C1"}})
	return e, w
}

// A cluster that fails validation: STATIC is not a type gRPC clients take.
func badCluster(name string) *clusterv3.Cluster { return &clusterv3.Cluster{Name: name} }

func TestDeltaACKAndNACK(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, delta protocol) {
		t.Parallel()
		e, w := deltaClusterEnv(t, delta, config{})
		e.sendDelta(deltaResp("d1", nil, res("C1", "v1", testutils.Cluster("C1", "eds-1"))))
		// ACK: only the nonce.
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d1"})
		if c := w.wantUpdate(t, "C1"); c.EDSServiceName() != "eds-1" {
			t.Fatalf("cluster EDS name %q, want eds-1", c.EDSServiceName())
		}

		// NACK: the nonce and error_detail; the watcher keeps v1.
		e.sendDelta(deltaResp("d2", nil, res("C1", "v2", badCluster("C1"))))
		wantNACK(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d2"}, `"C1"`, "STATIC")
		w.wantError(t, "ambient-error", client.ErrResourceInvalid, "C1")
		// Versions are per resource; system_version_info is for debugging only.
		if st, _ := status(e.c, cdsURL, "C1"); st.Version != "v1" || st.Status != client.StatusNACKed {
			t.Fatalf("dump %+v, want NACKED serving v1", st)
		}

		e.sendDelta(deltaResp("d3", nil, res("C1", "v3", testutils.Cluster("C1", "eds-3"))))
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d3"})
		if c := w.wantUpdate(t, "C1"); c.EDSServiceName() != "eds-3" {
			t.Fatalf("cluster EDS name %q, want eds-3", c.EDSServiceName())
		}
	})
}

// Subscription changes carry only the change, and no nonce.
func TestDeltaSubscribeAndUnsubscribe(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, delta protocol) {
		t.Parallel()
		e, _ := deltaClusterEnv(t, delta, config{})
		e.sendDelta(deltaResp("d1", nil, res("C1", "v1", testutils.Cluster("C1", ""))))
		e.deltaReq()
		cancel2 := client.WatchCluster(e.c, "C2", newRecorder[*resources.Cluster]())
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"C2"}})
		// A second watcher of C2 shares the subscription: its cancel sends
		// nothing, so the next request is the unsubscription of C2.
		cancel2b := client.WatchCluster(e.c, "C2", newRecorder[*resources.Cluster]())
		cancel2b()
		cancel2()
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesUnsubscribe: []string{"C2"}})
	})
}

// The wildcard alone is the legacy form: a first request subscribing
// nothing. Leaving it takes "*" subscribed, then unsubscribed, since a
// stream that never subscribed a name is still the legacy wildcard (see
// TestDeltaWildcardForms in the transport for every transition).
func TestDeltaWildcardAddAndRemove(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, delta protocol) {
		t.Parallel()
		// fail_on_data_errors: removed means dropped (gRFC A88).
		e := newFakeEnv(t, delta, config{features: []string{bootstrap.FeatureFailOnDataErrors}})
		ww := newRecorder[*resources.Cluster]()
		cancel := client.WatchCluster(e.c, resources.Wildcard, ww)
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{Node: wantNode, TypeUrl: cdsURL})
		e.sendDelta(deltaResp("d1", nil, res("A", "1", testutils.Cluster("A", "")), res("B", "1", testutils.Cluster("B", ""))))
		e.deltaReq()
		got := map[string]bool{ww.next(t).value.Name: true, ww.next(t).value.Name: true}
		if !got["A"] || !got["B"] {
			t.Fatalf("wildcard watcher got %v, want A and B", got)
		}
		e.sendDelta(deltaResp("d2", []string{"B"}))
		e.deltaReq()
		ww.wantNotFound(t, "B")
		cancel()
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"*"}})
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesUnsubscribe: []string{"*"}})
		if d := e.c.Dump(); len(d) != 0 {
			t.Fatalf("cache holds %v after the wildcard watch ended", d)
		}
	})
}

// removed_resources deletes at once, whether the client held the resource
// or had only asked for it: no waiting for the does-not-exist timer.
func TestDeltaRemovedResourcesAreDeletedAtOnce(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, delta protocol) {
		t.Parallel()
		// fail_on_data_errors: removed means dropped (gRFC A88).
		e, w1 := deltaClusterEnv(t, delta, config{expiry: noExpiry, features: []string{bootstrap.FeatureFailOnDataErrors}})
		w2 := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, "C2", w2)
		e.deltaReq()
		e.sendDelta(deltaResp("d1", nil, res("C1", "v1", testutils.Cluster("C1", ""))))
		e.deltaReq()
		w1.wantUpdate(t, "C1")

		e.sendDelta(deltaResp("d2", []string{"C1", "C2"}))
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d2"})
		w1.wantNotFound(t, "C1")
		w2.wantNotFound(t, "C2")
		// It may come back, and is then delivered.
		resp := deltaResp("d3", nil, res("C2", "v1", testutils.Cluster("C2", "")))
		e.sendDelta(resp)
		e.deltaReq()
		w2.wantUpdate(t, "C2")
		// removed_resource_names, the newer spelling, works alike.
		resp = deltaResp("d4", nil)
		resp.RemovedResourceNames = []*discoveryv3.ResourceName{{Name: "C2"}}
		e.sendDelta(resp)
		e.deltaReq()
		w2.wantNotFound(t, "C2")
	})
}

// A delta response deletes nothing by omission, even for Listener and
// Cluster.
func TestDeltaOmissionDeletesNothing(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, delta protocol) {
		t.Parallel()
		e, w1 := deltaClusterEnv(t, delta, config{})
		client.WatchCluster(e.c, "C2", newRecorder[*resources.Cluster]())
		e.deltaReq()
		e.sendDelta(deltaResp("d1", nil, res("C1", "v1", testutils.Cluster("C1", "")), res("C2", "v1", testutils.Cluster("C2", ""))))
		e.deltaReq()
		w1.wantUpdate(t, "C1")
		e.sendDelta(deltaResp("d2", nil, res("C2", "v2", testutils.Cluster("C2", "x"))))
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d2"})
		e.sendDelta(deltaResp("d3", nil))
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d3"})
		barrier(t, e.c)
		w1.none(t)
	})
}

func TestDeltaDuplicateAndMistypedResourcesAreNACKed(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, delta protocol) {
		t.Parallel()
		e, w := deltaClusterEnv(t, delta, config{})
		e.sendDelta(deltaResp("d1", nil, res("C1", "v1", testutils.Cluster("C1", "")), res("C1", "v2", testutils.Cluster("C1", "x"))))
		wantNACK(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d1"}, `"C1"`, "more than once")
		w.wantError(t, "resource-error", client.ErrResourceInvalid, "C1")
		e.sendDelta(deltaResp("d2", nil, res("C1", "v3", testutils.Listener("C1", "R1"))))
		wantNACK(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d2"}, "type_url", ldsURL)
		w.wantError(t, "resource-error", client.ErrResourceInvalid, "C1")
	})
}

// A heartbeat (a resource with its current version and no body) is ACKed
// and refreshes the TTL, but is not an update.
func TestDeltaHeartbeatIsACKedNotDelivered(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, delta protocol) {
		t.Parallel()
		e, w := deltaClusterEnv(t, delta, config{})
		e.sendDelta(deltaResp("d1", nil, testutils.WrapResource("C1", "v1", time.Hour, testutils.Cluster("C1", ""))))
		e.deltaReq()
		w.wantUpdate(t, "C1")
		e.sendDelta(deltaResp("d2", nil, testutils.WrapResource("C1", "v1", time.Hour, nil)))
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d2"})
		barrier(t, e.c)
		w.none(t)
	})
}

// On a new stream, the first request subscribes to every name again and
// lists, in initial_resource_versions, the version of every resource held
// (by name or through the wildcard): the last accepted one, never a rejected
// one, and nothing for names never received. Later requests do not carry it.
func TestDeltaReconnectSendsInitialResourceVersions(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, delta protocol) {
		t.Parallel()
		e, w1 := deltaClusterEnv(t, delta, config{})
		for _, name := range []string{"C2", "C3", "C4", resources.Wildcard} {
			client.WatchCluster(e.c, name, newRecorder[*resources.Cluster]())
			e.deltaReq()
		}
		e.sendDelta(deltaResp("d1", nil,
			res("C1", "v1", testutils.Cluster("C1", "")),
			res("C2", "v4", testutils.Cluster("C2", "")),
			res("C4", "v1", badCluster("C4")),
			res("X", "x1", testutils.Cluster("X", "")), // through the wildcard only
		))
		e.deltaReq() // NACK of C4
		w1.wantUpdate(t, "C1")
		e.sendDelta(deltaResp("d2", nil, res("C2", "v5", testutils.Cluster("C2", "new")), res("C1", "v2", badCluster("C1"))))
		e.deltaReq() // NACK of C1 v2

		first := e.nextStream()
		first.Cut(grpcstatus.Error(codes.Unavailable, "going away"))
		second := e.nextStream()
		r, err := second.NextDeltaRequest(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		wantReq(t, r, &discoveryv3.DeltaDiscoveryRequest{
			Node:                    wantNode,
			TypeUrl:                 cdsURL,
			ResourceNamesSubscribe:  []string{"*", "C1", "C2", "C3", "C4"},
			InitialResourceVersions: map[string]string{"C1": "v1", "C2": "v5", "X": "x1"},
		})
		client.WatchCluster(e.c, "C5", newRecorder[*resources.Cluster]())
		r, err = second.NextDeltaRequest(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		wantReq(t, r, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"C5"}})
	})
}
