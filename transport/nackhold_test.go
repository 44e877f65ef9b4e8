package transport_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/backoff"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// wireReq is what the NACK-pacing tests read of a request, SotW or delta.
type wireReq struct {
	typeURL, nonce string
	nack           bool
	names          []string // SotW: resource_names; delta: resource_names_subscribe
}

// nextReq reads the next request of either variant.
func (e *env) nextReq(delta bool) wireReq {
	e.t.Helper()
	if delta {
		r := e.nextDelta()
		return wireReq{r.GetTypeUrl(), r.GetResponseNonce(), r.GetErrorDetail() != nil, r.GetResourceNamesSubscribe()}
	}
	r := e.next()
	return wireReq{r.GetTypeUrl(), r.GetResponseNonce(), r.GetErrorDetail() != nil, r.GetResourceNames()}
}

// sendListener sends a response of one listener, SotW or delta.
func (e *env) sendListener(delta bool, version, nonce string) {
	e.t.Helper()
	var err error
	if delta {
		r := testutils.DeltaResponse(ldsURL, nonce, nil, testutils.WrapResource("L1", version, 0, testutils.Listener("L1", "R1")))
		r.SystemVersionInfo = version
		err = e.fs.SendDelta(r)
	} else {
		err = e.fs.Send(testutils.SotWResponse(ldsURL, version, nonce, testutils.Listener("L1", "R1")))
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// sendEndpoints sends a response of one ClusterLoadAssignment.
func (e *env) sendEndpoints(delta bool, version, nonce string) {
	e.t.Helper()
	cla := testutils.ClusterLoadAssignment("E1", "127.0.0.1", 8080)
	var err error
	if delta {
		err = e.fs.SendDelta(testutils.DeltaResponse(edsURL, nonce, nil, testutils.WrapResource("E1", version, 0, cla)))
	} else {
		err = e.fs.Send(testutils.SotWResponse(edsURL, version, nonce, cla))
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// A repeated NACK is held, but only its reply: responses of other types are
// read and answered while it is held, and a newer response of the held type
// replaces it, so the held NACK is never sent. The holds are long (2 s) and
// the test asserts the order of the requests, not their timing: before the
// reply was held apart from the receive loop, the EDS ACK came only after
// the held NACK.
func TestHeldNACKLetsOtherTypesFlow(t *testing.T) {
	forEachAPIType(t, []bootstrap.APIType{bootstrap.APITypeAggregatedGRPC, bootstrap.APITypeAggregatedDeltaGRPC}, func(t *testing.T, api bootstrap.APIType) {
		delta := api == bootstrap.APITypeAggregatedDeltaGRPC
		opts := fastOptions
		opts.NACKBackoff = backoff.Config{BaseDelay: 2 * time.Second, Multiplier: 1, MaxDelay: 2 * time.Second}
		e := newEnv(t, api, opts, nil)
		e.h.setVerdict(func(r *transport.Response) error {
			if r.TypeURL == ldsURL {
				return errRejected
			}
			return nil
		})
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		if r := e.nextReq(delta); r.typeURL != ldsURL {
			t.Fatalf("first request %+v, want LDS", r)
		}
		e.tr.UpdateSubscriptions(edsURL, []string{"E1"}, nil)
		if r := e.nextReq(delta); r.typeURL != edsURL {
			t.Fatalf("second request %+v, want EDS", r)
		}

		// The first NACK of a version goes out at once.
		e.sendListener(delta, "v1", "l1")
		if r := e.nextReq(delta); r.typeURL != ldsURL || r.nonce != "l1" || !r.nack {
			t.Fatalf("reply %+v, want the NACK of l1", r)
		}
		// Its repeat is held; EDS behind it flows.
		e.sendListener(delta, "v1", "l2")
		e.sendEndpoints(delta, "e1", "e1")
		if r := e.nextReq(delta); r.typeURL != edsURL || r.nonce != "e1" || r.nack {
			t.Fatalf("reply %+v, want the ACK of EDS e1 while the NACK of l2 is held", r)
		}
		// A newer response of the held type replaces the held NACK: the
		// next LDS request answers l3, and nothing ever answers l2.
		e.sendListener(delta, "v1", "l3")
		e.sendEndpoints(delta, "e2", "e2")
		if r := e.nextReq(delta); r.typeURL != edsURL || r.nonce != "e2" || r.nack {
			t.Fatalf("reply %+v, want the ACK of EDS e2 while the NACK of l3 is held", r)
		}
		if r := e.nextReq(delta); r.typeURL != ldsURL || r.nonce != "l3" || !r.nack {
			t.Fatalf("reply %+v, want the held NACK of l3 (that of l2 replaced)", r)
		}
	})
}

// A subscription change of a type whose NACK is held goes out at once, and
// carries the NACK: without it, the request would read as an ACK of the
// rejected response.
func TestHeldNACKGoesOutWithSubscriptionChange(t *testing.T) {
	forEachAPIType(t, []bootstrap.APIType{bootstrap.APITypeAggregatedGRPC, bootstrap.APITypeAggregatedDeltaGRPC}, func(t *testing.T, api bootstrap.APIType) {
		delta := api == bootstrap.APITypeAggregatedDeltaGRPC
		opts := fastOptions
		opts.NACKBackoff = backoff.Config{BaseDelay: time.Hour, Multiplier: 1, MaxDelay: time.Hour}
		e := newEnv(t, api, opts, nil)
		e.h.setVerdict(func(r *transport.Response) error {
			if r.TypeURL == ldsURL {
				return errRejected
			}
			return nil
		})
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		e.nextReq(delta)
		e.tr.UpdateSubscriptions(edsURL, []string{"E1"}, nil)
		e.nextReq(delta)
		e.sendListener(delta, "v1", "l1")
		if r := e.nextReq(delta); r.nonce != "l1" || !r.nack {
			t.Fatalf("reply %+v, want the NACK of l1", r)
		}
		e.sendListener(delta, "v1", "l2")
		// Once EDS behind it is answered, the NACK of l2 is held.
		e.sendEndpoints(delta, "e1", "e1")
		if r := e.nextReq(delta); r.typeURL != edsURL || r.nonce != "e1" {
			t.Fatalf("reply %+v, want the ACK of EDS e1", r)
		}
		e.tr.UpdateSubscriptions(ldsURL, []string{"L2"}, nil)
		r := e.nextReq(delta)
		wantNames := []string{"L1", "L2"}
		if delta {
			wantNames = []string{"L2"}
		}
		if r.typeURL != ldsURL || r.nonce != "l2" || !r.nack || len(r.names) != len(wantNames) || r.names[len(r.names)-1] != "L2" {
			t.Fatalf("request %+v, want names %v with the NACK of l2", r, wantNames)
		}
	})
}
