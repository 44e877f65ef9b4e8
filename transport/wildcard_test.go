package transport_test

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

// The wildcard alone is the legacy form (an empty list); beside names it is
// "*"; once a stream has named anything, "*" stays explicit, since an empty
// list would then mean "nothing"; a new stream chooses the form afresh.
func TestSotWWildcardForms(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		e := newEnv(t, sotw, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: cdsURL})
		e.fs.Send(testutils.SotWResponse(cdsURL, "v1", "n1", testutils.Cluster("A", "")))
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResponseNonce: "n1"})
		// Names join the wildcard: "*" is named with them.
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"*", "C1"}, ResponseNonce: "n1"})
		// The names go: the wildcard stays explicit.
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C1"})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"*"}, ResponseNonce: "n1"})
		e.fs.Send(testutils.SotWResponse(cdsURL, "v2", "n2", testutils.Cluster("A", "")))
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v2", ResourceNames: []string{"*"}, ResponseNonce: "n2"})
		// The wildcard goes: an empty list now means nothing.
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"*"})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v2", ResourceNames: []string{}, ResponseNonce: "n2"})
		// A name, then the wildcard beside it.
		e.tr.UpdateSubscriptions(cdsURL, []string{"C2"}, nil)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v2", ResourceNames: []string{"C2"}, ResponseNonce: "n2"})
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v2", ResourceNames: []string{"*", "C2"}, ResponseNonce: "n2"})

		// A new stream: mixed, so explicit from the start.
		e.fs.CutStream(status.Error(codes.Unavailable, "bye"))
		want(t, e.next(), &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: cdsURL, VersionInfo: "v2", ResourceNames: []string{"*", "C2"}})
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C2"})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v2", ResourceNames: []string{"*"}})
		// Another new stream: the wildcard alone, so the legacy form again.
		e.fs.CutStream(status.Error(codes.Unavailable, "bye"))
		want(t, e.next(), &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: cdsURL, VersionInfo: "v2"})
	})
}

// Dropping a legacy wildcard takes two requests: an empty list would still
// mean the wildcard, so "*" is named first, then left out.
func TestSotWLeaveLegacyWildcard(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		e := newEnv(t, sotw, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: cdsURL})
		e.fs.Send(testutils.SotWResponse(cdsURL, "v1", "n1", testutils.Cluster("A", "")))
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResponseNonce: "n1"})
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"*"})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"*"}, ResponseNonce: "n1"})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{}, ResponseNonce: "n1"})
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"*"}, ResponseNonce: "n1"})
	})
}

// A legacy wildcard dropped and wanted again at once: the server still
// learns of the removal (the client forgot what the wildcard brought), then
// of the new subscription, whatever the sender's timing.
func TestSotWLegacyWildcardDroppedAndWantedAgain(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		e := newEnv(t, sotw, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: cdsURL})
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"*"})
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"*"}})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{}})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"*"}})
	})
}

// Delta: the wildcard alone subscribes nothing, ever (the legacy form);
// names joining it subscribe "*" too; later changes are plain deltas; a new
// stream chooses the form afresh.
func TestDeltaWildcardForms(t *testing.T) {
	forEachAPIType(t, deltaVariants, func(t *testing.T, delta bootstrap.APIType) {
		h := newHandler()
		e := newEnv(t, delta, fastOptions, h)
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: cdsURL})
		e.fs.SendDelta(testutils.DeltaResponse(cdsURL, "n1", nil))
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "n1"})
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"*", "C1"}})
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C1"})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesUnsubscribe: []string{"C1"}})
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"*"})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesUnsubscribe: []string{"*"}})
		e.tr.UpdateSubscriptions(cdsURL, []string{"C2"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"C2"}})
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"*"}})

		h.mu.Lock()
		h.versions = map[string]map[string]string{cdsURL: {"A": "a1", "C2": "c1"}}
		h.mu.Unlock()
		e.fs.CutStream(status.Error(codes.Unavailable, "bye"))
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			Node: testNode, TypeUrl: cdsURL,
			ResourceNamesSubscribe:  []string{"*", "C2"},
			InitialResourceVersions: map[string]string{"A": "a1", "C2": "c1"},
		})
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C2"})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesUnsubscribe: []string{"C2"}})
		// The wildcard alone on a new stream: legacy again, with what is held.
		e.fs.CutStream(status.Error(codes.Unavailable, "bye"))
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			Node: testNode, TypeUrl: cdsURL,
			InitialResourceVersions: map[string]string{"A": "a1", "C2": "c1"},
		})
	})
}

// Delta: a legacy wildcard cannot be dropped by unsubscribing "*" alone (a
// stream that never subscribed a name is still the legacy wildcard), so "*"
// is subscribed first, then unsubscribed; wanted again at once, it is
// subscribed once more after the removal.
func TestDeltaLeaveLegacyWildcard(t *testing.T) {
	forEachAPIType(t, deltaVariants, func(t *testing.T, delta bootstrap.APIType) {
		e := newEnv(t, delta, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: cdsURL})
		e.fs.SendDelta(testutils.DeltaResponse(cdsURL, "n1", nil))
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "n1"})
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"*"})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"*"}})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesUnsubscribe: []string{"*"}})
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"*"}})

		// Dropped and wanted again before the sender ran.
		e.fs.CutStream(status.Error(codes.Unavailable, "bye"))
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: cdsURL})
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"*"})
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"*"}})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesUnsubscribe: []string{"*"}})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"*"}})
	})
}
