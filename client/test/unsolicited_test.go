package test

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// A SotW response of a type the client never asked for is ignored, its
// version not adopted and no reply sent (PROTOCOL.md, SotW rules): the
// first request of the type, once watched, carries no version and no nonce,
// so the server sends what it has. Adopting the version made that request
// claim "9", a version the client never applied.
func TestSotWUnsolicitedTypeNeverUsed(t *testing.T) {
	forEachProtocol(t, []protocol{sotw}, func(t *testing.T, p protocol) {
		t.Parallel()
		e, _ := sotwListenerEnv(t, p, config{})
		e.send(testutils.SotWResponse(cdsURL, "9", "c1", testutils.Cluster("C1", "")))
		// Responses are read in order: once L1 is ACKed, the CDS response
		// was handled, and it got no reply.
		e.send(sotwResp(ldsURL, "1", testutils.Listener("L1", "R1")))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "1", ResourceNames: []string{"L1"}, ResponseNonce: "n1"})
		client.WatchCluster(e.c, "C1", newRecorder[*resources.Cluster]())
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1"}})
	})
}

// Likewise for a type the client subscribed to, then dropped: the response
// that comes after the unsubscription is ignored, unanswered, and its
// version not adopted; its nonce is the latest of the type, so the next
// request carries it, with the version last applied. (ADS only: a listener
// exchange on the same stream shows when the CDS response has been read.)
func TestSotWUnsolicitedAfterUnsubscribe(t *testing.T) {
	forEachProtocol(t, []protocol{sotw}, func(t *testing.T, p protocol) {
		t.Parallel()
		e, _ := sotwListenerEnv(t, p, config{})
		cancel := client.WatchCluster(e.c, "C1", newRecorder[*resources.Cluster]())
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1"}})
		e.send(testutils.SotWResponse(cdsURL, "1", "c1", testutils.Cluster("C1", "")))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "1", ResourceNames: []string{"C1"}, ResponseNonce: "c1"})
		cancel()
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "1", ResponseNonce: "c1"})

		e.send(testutils.SotWResponse(cdsURL, "2", "c2", testutils.Cluster("C1", "other")))
		e.send(sotwResp(ldsURL, "1", testutils.Listener("L1", "R1")))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "1", ResourceNames: []string{"L1"}, ResponseNonce: "n1"})
		client.WatchCluster(e.c, "C2", newRecorder[*resources.Cluster]())
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "1", ResourceNames: []string{"C2"}, ResponseNonce: "c2"})
	})
}

// Delta: a response of a type not subscribed to is ignored, so what it
// carried is not held: the first request of the type, and that of a new
// stream, list no initial_resource_versions for it.
func TestDeltaUnsolicitedResourcesAreNotHeld(t *testing.T) {
	forEachProtocol(t, []protocol{delta}, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{})
		client.WatchListener(e.c, "L1", newRecorder[*resources.Listener]())
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{Node: wantNode, TypeUrl: ldsURL, ResourceNamesSubscribe: []string{"L1"}})
		e.sendDelta(testutils.DeltaResponse(cdsURL, "c1", nil, res("C1", "v9", testutils.Cluster("C1", ""))))
		e.sendDelta(testutils.DeltaResponse(ldsURL, "l1", nil, res("L1", "v1", testutils.Listener("L1", "R1"))))
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: ldsURL, ResponseNonce: "l1"})

		client.WatchCluster(e.c, "C1", newRecorder[*resources.Cluster]())
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"C1"}})
		if err := e.fs.CutStream(nil); err != nil {
			t.Fatal(err)
		}
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{
			Node: wantNode, TypeUrl: ldsURL, ResourceNamesSubscribe: []string{"L1"},
			InitialResourceVersions: map[string]string{"L1": "v1"},
		})
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"C1"}})
	})
}
