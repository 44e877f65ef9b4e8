package transport_test

import (
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

// A name removed and wanted again before the removal reached the server
// (here in one call: removals come first) is not cancelled out: the client
// forgot the resource, and a server that never heard of the removal would
// never send it again. The removal goes out, then the new subscription.
func TestResubscribeAfterUnsentRemovalReachesTheServer(t *testing.T) {
	t.Run("sotw", func(t *testing.T) {
		e := newEnv(t, bootstrap.APITypeAggregatedGRPC, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1", "C2"}, nil)
		e.next()
		e.fs.Send(testutils.SotWResponse(cdsURL, "v1", "n1"))
		e.next() // ACK
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, []string{"C1"})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"C2"}, ResponseNonce: "n1"})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"C1", "C2"}, ResponseNonce: "n1"})
		// Removed again before it went out: it never does.
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C2"})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"C1"}, ResponseNonce: "n1"})
	})
	t.Run("delta", func(t *testing.T) {
		e := newEnv(t, bootstrap.APITypeAggregatedDeltaGRPC, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1", "C2"}, nil)
		e.nextDelta()
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, []string{"C1"})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesUnsubscribe: []string{"C1"}})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"C1"}})
		// The handler hears of the new subscription, to start its
		// does-not-exist timer.
		<-e.h.sent // the first request's
		if got := <-e.h.sent; got.typeURL != cdsURL || len(got.names) != 1 || got.names[0] != "C1" {
			t.Fatalf("reported %v sent, want the new subscription to C1", got)
		}
	})
}

// Over a gRPC stream every response must carry a nonce, which pairs it with
// its ACK or NACK. One without is NACKed, saying so, and never reaches the
// handler: it is not applied. The stream carries on.
func TestResponseWithoutNonceIsNACKedUnread(t *testing.T) {
	t.Run("sotw", func(t *testing.T) {
		e := newEnv(t, bootstrap.APITypeAggregatedGRPC, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
		e.next()
		e.fs.Send(testutils.SotWResponse(cdsURL, "v1", "", testutils.Cluster("C1", "")))
		r := e.next()
		if !strings.Contains(r.GetErrorDetail().GetMessage(), "nonce") {
			t.Fatalf("reply %v, want a NACK about the nonce", r)
		}
		r.ErrorDetail = nil
		want(t, r, &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1"}})
		e.fs.Send(testutils.SotWResponse(cdsURL, "v2", "n2", testutils.Cluster("C1", "")))
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v2", ResourceNames: []string{"C1"}, ResponseNonce: "n2"})
		wantOnlyResponse(t, e.h, "n2")
	})
	t.Run("delta", func(t *testing.T) {
		e := newEnv(t, bootstrap.APITypeAggregatedDeltaGRPC, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
		e.nextDelta()
		e.fs.SendDelta(testutils.DeltaResponse(cdsURL, "", nil, testutils.WrapResource("C1", "1", 0, testutils.Cluster("C1", ""))))
		r := e.nextDelta()
		if !strings.Contains(r.GetErrorDetail().GetMessage(), "nonce") {
			t.Fatalf("reply %v, want a NACK about the nonce", r)
		}
		e.fs.SendDelta(testutils.DeltaResponse(cdsURL, "d2", nil, testutils.WrapResource("C1", "2", 0, testutils.Cluster("C1", ""))))
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d2"})
		wantOnlyResponse(t, e.h, "d2")
	})
}

// wantOnlyResponse checks that the one response the handler got has nonce.
func wantOnlyResponse(t *testing.T, h *handler, nonce string) {
	t.Helper()
	if r := h.nextResponse(t); r.Nonce != nonce {
		t.Fatalf("the handler got the response of nonce %q, want only %q's", r.Nonce, nonce)
	}
	select {
	case r := <-h.responses:
		t.Fatalf("the handler also got %v", r)
	default:
	}
}
