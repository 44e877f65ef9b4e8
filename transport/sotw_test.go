package transport_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

const sotw = bootstrap.APITypeAggregatedGRPC

func TestSotWFirstRequestCarriesNodeAndNames(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		e := newEnv(t, sotw, fastOptions, nil)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L2", "L1"}, nil)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{
			Node:          testNode,
			TypeUrl:       ldsURL,
			ResourceNames: []string{"L1", "L2"},
		})
		if s := <-e.h.sent; s.typeURL != ldsURL || len(s.names) != 2 {
			t.Fatalf("OnSubscriptionsSent(%v), want the two listener names", s)
		}
	})
}

func TestSotWACKCarriesVersionAndNonce(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		e := newEnv(t, sotw, fastOptions, nil)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		e.next()
		if err := e.fs.Send(testutils.SotWResponse(ldsURL, "v1", "n1", testutils.Listener("L1", "R1"))); err != nil {
			t.Fatal(err)
		}
		r := e.h.nextResponse(t)
		if r.Version != "v1" || r.Nonce != "n1" || len(r.Resources) != 1 || r.Delta {
			t.Fatalf("handler got %+v", r)
		}
		// No node after the first request of the stream.
		want(t, e.next(), &discoveryv3.DiscoveryRequest{
			TypeUrl:       ldsURL,
			VersionInfo:   "v1",
			ResourceNames: []string{"L1"},
			ResponseNonce: "n1",
		})
	})
}

func TestSotWNACKKeepsAcceptedVersionAndSetsErrorDetail(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		e := newEnv(t, sotw, fastOptions, nil)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		e.next()
		e.fs.Send(testutils.SotWResponse(ldsURL, "v1", "n1", testutils.Listener("L1", "R1")))
		e.next() // ACK of v1
		e.h.setVerdict(func(*transport.Response) error { return errRejected })
		e.fs.Send(testutils.SotWResponse(ldsURL, "v2", "n2", testutils.Listener("L1", "")))
		want(t, e.next(), &discoveryv3.DiscoveryRequest{
			TypeUrl:       ldsURL,
			VersionInfo:   "v1", // the last accepted, not the rejected v2
			ResourceNames: []string{"L1"},
			ResponseNonce: "n2",
			ErrorDetail:   &statuspb.Status{Code: int32(codes.InvalidArgument), Message: errRejected.Error()},
		})
		e.h.setVerdict(nil)
		e.fs.Send(testutils.SotWResponse(ldsURL, "v3", "n3", testutils.Listener("L1", "R1")))
		want(t, e.next(), &discoveryv3.DiscoveryRequest{
			TypeUrl: ldsURL, VersionInfo: "v3", ResourceNames: []string{"L1"}, ResponseNonce: "n3",
		})
	})
}

func TestSotWSubscriptionChangesListEveryName(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		e := newEnv(t, sotw, fastOptions, nil)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		e.next()
		e.fs.Send(testutils.SotWResponse(ldsURL, "v1", "n1", testutils.Listener("L1", "R1")))
		e.next()
		// Adding a name: the full list, with the current version and nonce.
		e.tr.UpdateSubscriptions(ldsURL, []string{"L2"}, nil)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{
			TypeUrl: ldsURL, VersionInfo: "v1", ResourceNames: []string{"L1", "L2"}, ResponseNonce: "n1",
		})
		// Removing one: the list without it.
		e.tr.UpdateSubscriptions(ldsURL, nil, []string{"L1"})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{
			TypeUrl: ldsURL, VersionInfo: "v1", ResourceNames: []string{"L2"}, ResponseNonce: "n1",
		})
		// Removing the last: an empty list, which after names means "none".
		e.tr.UpdateSubscriptions(ldsURL, nil, []string{"L2"})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{
			TypeUrl: ldsURL, VersionInfo: "v1", ResponseNonce: "n1",
		})
		// Each request that changed the subscriptions was reported, in order,
		// with every name it listed; the ACK changed none. A report follows
		// the send, so the server may see a request before it is reported:
		// wait for each.
		for i, want := range [][]string{{"L1"}, {"L1", "L2"}, {"L2"}, {}} {
			if s := nextSent(t, e.h); s.names == nil || !slices.Equal(s.names, want) {
				t.Fatalf("OnSubscriptionsSent report %d: %#v, want %#v (non-nil)", i+1, s.names, want)
			}
		}
		select {
		case s := <-e.h.sent:
			t.Fatalf("an extra OnSubscriptionsSent report: %#v", s.names)
		default:
		}
	})
}

// Many names changed at once go out in one request.
func TestSotWBatchedSubscriptionIsOneRequest(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		e := newEnv(t, sotw, fastOptions, nil)
		var names []string
		for i := range 1000 {
			names = append(names, fmt.Sprintf("C%04d", i))
		}
		e.tr.UpdateSubscriptions(edsURL, names, nil)
		if got := len(e.next().ResourceNames); got != 1000 {
			t.Fatalf("first request names %d clusters, want all 1000", got)
		}
	})
}

// Each type is its own sub-stream: its own version and nonce.
func TestSotWTypesHaveIndependentVersionsAndNonces(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		e := newEnv(t, sotw, fastOptions, nil)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		e.next()
		e.tr.UpdateSubscriptions(rdsURL, []string{"R1"}, nil)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{Node: nodeOfNewType(sotw), TypeUrl: rdsURL, ResourceNames: []string{"R1"}})
		e.fs.Send(testutils.SotWResponse(ldsURL, "lv1", "ln1", testutils.Listener("L1", "R1")))
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "lv1", ResourceNames: []string{"L1"}, ResponseNonce: "ln1"})
		e.tr.UpdateSubscriptions(rdsURL, []string{"R2"}, nil)
		want(t, e.next(), &discoveryv3.DiscoveryRequest{TypeUrl: rdsURL, ResourceNames: []string{"R1", "R2"}})
	})
}

// A subscription added and removed while the stream is down sends
// nothing, and a type whose names are all gone sends no request on the next
// stream: an empty list is never the first request of a type on a stream (it
// would read as the legacy wildcard). The changes are made while the runners
// wait on a fake clock to reconnect, so nothing can reach the wire between
// them.
func TestSotWNoEmptyFirstRequest(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
		opts := transport.Options{
			Backoff:           backoff.Config{BaseDelay: time.Second, Multiplier: 1, MaxDelay: time.Second},
			MinStreamInterval: time.Second,
			Clock:             clk,
		}
		e := newEnv(t, sotw, opts, nil)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"C0"}, nil)
		runners := 1
		if perType(sotw) {
			runners = 2
		}
		for range 2 { // L1 and C0, on one stream or two
			e.next()
		}
		if err := e.fs.CutStream(errors.New("cut")); err != nil {
			t.Fatal(err)
		}
		if err := clk.WaitForTimers(ctxT(t), runners); err != nil {
			t.Fatalf("waiting for the runners to wait to reconnect: %v", err)
		}
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C0"})
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C1"})
		e.tr.UpdateSubscriptions(rdsURL, []string{"R1"}, nil)
		clk.Advance(time.Second)
		// A name subscribed after the reconnect: the first cluster request
		// the server sees from now on must be this one, since a type's
		// requests are sent in order.
		e.tr.UpdateSubscriptions(cdsURL, []string{"C2"}, nil)
		got := map[string][]string{}
		for len(got) < 3 {
			r := e.next()
			if _, seen := got[r.TypeUrl]; seen {
				t.Fatalf("a second %s request %v before every type's first", r.TypeUrl, r)
			}
			got[r.TypeUrl] = r.ResourceNames
		}
		wantNames := map[string][]string{ldsURL: {"L1"}, rdsURL: {"R1"}, cdsURL: {"C2"}}
		for typeURL, names := range wantNames {
			if !slices.Equal(got[typeURL], names) {
				t.Errorf("first %s request after the reconnect names %q, want %q", typeURL, got[typeURL], names)
			}
		}
	})
}

// The client does not read the next response until the handler is done
// with the previous one, and every response gets exactly one reply.
func TestSotWFlowControl(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		h := newHandler()
		h.hold = make(chan func(), 10)
		e := newEnv(t, sotw, fastOptions, h)
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		e.next()
		e.fs.Send(testutils.SotWResponse(ldsURL, "v1", "n1"))
		e.fs.Send(testutils.SotWResponse(ldsURL, "v2", "n2"))
		if r := h.nextResponse(t); r.Nonce != "n1" {
			t.Fatalf("first response nonce %q", r.Nonce)
		}
		done := <-h.hold
		// The ACK of n1 goes out before the handler is done...
		if r := e.next(); r.ResponseNonce != "n1" || r.VersionInfo != "v1" {
			t.Fatalf("reply %v, want ACK of n1", r)
		}
		// ...but n2 is not handed over until it is.
		select {
		case r := <-h.responses:
			t.Fatalf("response %q delivered before the previous one was done", r.Nonce)
		default:
		}
		done()
		if r := h.nextResponse(t); r.Nonce != "n2" {
			t.Fatalf("second response nonce %q", r.Nonce)
		}
		(<-h.hold)()
		if r := e.next(); r.ResponseNonce != "n2" || r.VersionInfo != "v2" {
			t.Fatalf("reply %v, want ACK of n2", r)
		}
	})
}

// Whatever the handler's verdict, the NACK's error_detail is at most
// MaxErrorDetailBytes and valid UTF-8 (a proto string must be; a verdict
// may quote what the server sent), cut at a rune boundary.
func TestNACKErrorDetailIsBoundedAndValid(t *testing.T) {
	e := newEnv(t, sotw, fastOptions, nil)
	long := "bad \xff " + strings.Repeat("é", transport.MaxErrorDetailBytes)
	e.h.setVerdict(func(*transport.Response) error { return errors.New(long) })
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	e.next()
	e.fs.Send(testutils.SotWResponse(ldsURL, "v1", "n1"))
	msg := e.next().GetErrorDetail().GetMessage()
	if len(msg) > transport.MaxErrorDetailBytes || len(msg) < transport.MaxErrorDetailBytes-1 ||
		!utf8.ValidString(msg) || !strings.HasPrefix(msg, "bad \uFFFD éé") {
		t.Fatalf("error_detail of %d bytes, valid UTF-8 %v, starting %.20q: want %d bytes at most, valid, the bad byte replaced",
			len(msg), utf8.ValidString(msg), msg, transport.MaxErrorDetailBytes)
	}
}
