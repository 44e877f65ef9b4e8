package transport_test

import (
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// A push crosses an unsubscription: the server sends response 2 before it
// reads the request that dropped C2, which carries nonce 1 and which it
// therefore ignores (go-control-plane does). While response 2 is judged the
// client wants C2 again. Had the ACK of 2 named C2, the server, never told of
// the removal, would believe the client holds C2 from response 2 and would
// not send it again; the client, which had dropped it, would wait forever.
// So the ACK says what was asked for when response 2 arrived, C1 alone: the
// server learns of the removal. The new subscription follows as its own
// request, and since it adds a name the server must send C2 again.
func TestSotWReplyToResponseCrossingUnsubscriptionPrecedesChange(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, api bootstrap.APIType) {
		h := newHandler()
		e := newEnv(t, api, fastOptions, h)
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1", "C2"}, nil)
		e.next()
		e.fs.Send(testutils.SotWResponse(cdsURL, "v1", "n1", testutils.Cluster("C1", ""), testutils.Cluster("C2", "")))
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"C1", "C2"}, ResponseNonce: "n1"})

		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C2"})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"C1"}, ResponseNonce: "n1"})

		// Response 2 was sent before the server read the removal. The client
		// wants C2 again while it judges it.
		judging, rewatched := make(chan struct{}), make(chan struct{})
		h.setVerdict(func(r *transport.Response) error {
			if r.Nonce == "n2" {
				close(judging)
				<-rewatched
			}
			return nil
		})
		e.fs.Send(testutils.SotWResponse(cdsURL, "v2", "n2", testutils.Cluster("C1", ""), testutils.Cluster("C2", "")))
		select {
		case <-judging:
		case <-time.After(10 * time.Second):
			t.Fatal("response 2 never reached the handler")
		}
		e.tr.UpdateSubscriptions(cdsURL, []string{"C2"}, nil)
		close(rewatched)

		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v2", ResourceNames: []string{"C1"}, ResponseNonce: "n2"})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v2", ResourceNames: []string{"C1", "C2"}, ResponseNonce: "n2"})

		// Only the requests that changed the subscriptions were reported,
		// the new one with every name: the ACK changed nothing.
		for i, want := range [][]string{{"C1", "C2"}, {"C1"}, {"C1", "C2"}} {
			if s := nextSent(t, h); !slices.Equal(s.names, want) {
				t.Fatalf("OnSubscriptionsSent report %d: %v, want %v", i+1, s.names, want)
			}
		}
		// Nothing else went out: response 3 is answered by the next request.
		e.fs.Send(testutils.SotWResponse(cdsURL, "v3", "n3", testutils.Cluster("C1", ""), testutils.Cluster("C2", "")))
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "v3", ResourceNames: []string{"C1", "C2"}, ResponseNonce: "n3"})
	})
}

// A NACK owed while the subscriptions changed carries the change: a change
// sent apart would read as an ACK of the rejected response, and the NACK's
// older version has the server send every name anyway.
func TestSotWNACKCarriesChangeMadeWhileJudged(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, api bootstrap.APIType) {
		h := newHandler()
		e := newEnv(t, api, fastOptions, h)
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
		e.next()
		judging, changed := make(chan struct{}), make(chan struct{})
		h.setVerdict(func(*transport.Response) error {
			close(judging)
			<-changed
			return errRejected
		})
		e.fs.Send(testutils.SotWResponse(cdsURL, "v1", "n1", testutils.Cluster("C1", "")))
		select {
		case <-judging:
		case <-time.After(10 * time.Second):
			t.Fatal("the response never reached the handler")
		}
		e.tr.UpdateSubscriptions(cdsURL, []string{"C2"}, nil)
		close(changed)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1", "C2"}, ResponseNonce: "n1",
			ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: errRejected.Error()}})
	})
}
