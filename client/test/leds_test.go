package test

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// LbEndpointCollection resources (gRFC A95) on the wire, against the
// scriptable fake server: the message has no name, so it is known by its
// discovery.v3.Resource wrapper's.

const collURL = resources.EndpointCollectionTypeURL

// A collection is subscribed to under its own type URL, accepted with the
// wrapper's name and ACKed; SotW and delta.
func TestEndpointCollectionProtocol(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{endpointFallback: true})
		w := newRecorder[*resources.EndpointCollection]()
		client.WatchEndpointCollection(e.c, "C1", w)
		node := bootstrapNodeA95()
		if p.delta {
			wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: collURL, ResourceNamesSubscribe: []string{"C1"}})
		} else {
			wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: collURL, ResourceNames: []string{"C1"}})
		}
		e.respond(p, collURL, "1", res("C1", "v1", testutils.EndpointCollection("10.0.0.1", 80, 81)))
		if p.delta {
			wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: collURL, ResponseNonce: "1"})
		} else {
			wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: collURL, VersionInfo: "v1", ResourceNames: []string{"C1"}, ResponseNonce: "1"})
		}
		ev := w.next(t)
		if ev.kind != "update" || len(ev.value.Endpoints) != 2 || ev.value.Endpoints[1].Addresses[0] != "10.0.0.1:81" {
			t.Fatalf("got %v, want the collection's two endpoints", ev)
		}
	})
}

// A collection sent bare in a SotW response has no name to be known by:
// the response is NACKed saying so (the client once neither applied nor
// reported it), and the watcher keeps waiting.
func TestEndpointCollectionWithoutName(t *testing.T) {
	e := newFakeEnv(t, sotw, config{endpointFallback: true})
	w := newRecorder[*resources.EndpointCollection]()
	client.WatchEndpointCollection(e.c, "C1", w)
	e.req()
	e.send(sotwResp(collURL, "1", testutils.EndpointCollection("10.0.0.1", 80)))
	wantNACK(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: collURL, ResourceNames: []string{"C1"}, ResponseNonce: "n1"},
		"LbEndpointCollection", "no name")
	barrier(t, e.c)
	w.none(t)
}

// bootstrapNodeA95 is the node of a client with A95 on.
func bootstrapNodeA95() *corev3.Node {
	return bootstrap.Node{ID: nodeID}.Proto(append(clientFeatures[:len(clientFeatures):len(clientFeatures)], "xds.endpoint.supports_lb_endpoint_collection"))
}
