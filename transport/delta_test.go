package transport_test

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

const delta = bootstrap.APITypeAggregatedDeltaGRPC

func TestDeltaInitialSubscribe(t *testing.T) {
	forEachAPIType(t, deltaVariants, func(t *testing.T, delta bootstrap.APIType) {
		e := newEnv(t, delta, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"C2", "C1"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			Node:                   testNode,
			TypeUrl:                cdsURL,
			ResourceNamesSubscribe: []string{"C1", "C2"},
		})
	})
}

func TestDeltaACKAndNACKCarryOnlyTheNonce(t *testing.T) {
	forEachAPIType(t, deltaVariants, func(t *testing.T, delta bootstrap.APIType) {
		e := newEnv(t, delta, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
		e.nextDelta()
		e.fs.SendDelta(testutils.DeltaResponse(cdsURL, "n1", nil, testutils.WrapResource("C1", "1", 0, testutils.Cluster("C1", ""))))
		r := e.h.nextResponse(t)
		if !r.Delta || r.Nonce != "n1" || len(r.DeltaResources) != 1 {
			t.Fatalf("handler got %+v", r)
		}
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "n1"})
		e.h.setVerdict(func(*transport.Response) error { return errRejected })
		e.fs.SendDelta(testutils.DeltaResponse(cdsURL, "n2", []string{"C9"}))
		if r := e.h.nextResponse(t); len(r.Removed) != 1 || r.Removed[0] != "C9" {
			t.Fatalf("removed %v, want [C9]", r.Removed)
		}
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl:       cdsURL,
			ResponseNonce: "n2",
			ErrorDetail:   &statuspb.Status{Code: int32(codes.InvalidArgument), Message: errRejected.Error()},
		})
	})
}

// Subscription changes carry only the change, and no nonce.
func TestDeltaSubscriptionChangesAreDeltas(t *testing.T) {
	forEachAPIType(t, deltaVariants, func(t *testing.T, delta bootstrap.APIType) {
		e := newEnv(t, delta, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
		e.nextDelta()
		e.fs.SendDelta(testutils.DeltaResponse(cdsURL, "n1", nil))
		e.nextDelta() // ACK
		e.tr.UpdateSubscriptions(cdsURL, []string{"C2"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"C2"}})
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C1"})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesUnsubscribe: []string{"C1"}})
		// Wildcard in and out, explicitly.
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"*"}})
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"*"})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesUnsubscribe: []string{"*"}})
	})
}

// On a new stream, the first request per type subscribes to everything
// wanted and lists the versions held; later requests never do.
func TestDeltaReconnectSendsInitialResourceVersions(t *testing.T) {
	forEachAPIType(t, deltaVariants, func(t *testing.T, delta bootstrap.APIType) {
		h := newHandler()
		h.versions = map[string]map[string]string{
			cdsURL: {"C1": "v1", "C2": "v7", "gone": "v3"}, // "gone" is no longer wanted
		}
		e := newEnv(t, delta, fastOptions, h)
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1", "C2", "C3"}, nil)
		first := e.nextDelta()
		// The very first stream sends what the client holds too (here, a
		// client that was handed its cache): only for wanted names.
		want(t, first, &discoveryv3.DeltaDiscoveryRequest{
			Node:                    testNode,
			TypeUrl:                 cdsURL,
			ResourceNamesSubscribe:  []string{"C1", "C2", "C3"},
			InitialResourceVersions: map[string]string{"C1": "v1", "C2": "v7"},
		})
		e.fs.SendDelta(testutils.DeltaResponse(cdsURL, "n1", nil))
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "n1"})
		e.tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"*"}})

		h.mu.Lock()
		h.versions[cdsURL] = map[string]string{"C1": "v2", "other": "v1"} // with "*", every held one counts
		h.mu.Unlock()
		e.fs.CutStream(status.Error(codes.Unavailable, "bye"))
		e.h.nextStreamErr(t)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			Node:                    testNode,
			TypeUrl:                 cdsURL,
			ResourceNamesSubscribe:  []string{"*", "C1", "C2", "C3"},
			InitialResourceVersions: map[string]string{"C1": "v2", "other": "v1"},
		})
		e.tr.UpdateSubscriptions(cdsURL, []string{"C4"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"C4"}})
	})
}

// Changes made while the stream is down are folded into the first request
// of the next stream, which subscribes to the full set and unsubscribes
// nothing: the new stream starts from zero.
func TestDeltaChangesWhileDownFoldIntoResubscription(t *testing.T) {
	forEachAPIType(t, deltaVariants, func(t *testing.T, delta bootstrap.APIType) {
		e := newEnv(t, delta, fastOptions, nil)
		e.tr.UpdateSubscriptions(edsURL, []string{"E1", "E2"}, nil)
		e.nextDelta()
		addr := e.fs.Address()
		e.fs.Stop()
		e.h.nextStreamErr(t)
		e.tr.UpdateSubscriptions(edsURL, []string{"E3"}, []string{"E1"})
		fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{Address: addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fs.Stop)
		r, err := fs.NextDeltaRequest(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		want(t, r, &discoveryv3.DeltaDiscoveryRequest{
			Node:                   testNode,
			TypeUrl:                edsURL,
			ResourceNamesSubscribe: []string{"E2", "E3"},
		})
	})
}
