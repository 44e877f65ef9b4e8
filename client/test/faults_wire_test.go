package test

import (
	"context"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Reading and answering a FakeStream, for the fault tests.

// wireReq is one request a FakeStream received, of either protocol.
type wireReq struct {
	sotw  *discoveryv3.DiscoveryRequest
	delta *discoveryv3.DeltaDiscoveryRequest
}

func (r wireReq) nonce() string {
	if r.delta != nil {
		return r.delta.GetResponseNonce()
	}
	return r.sotw.GetResponseNonce()
}

// errorDetail is the message of the request's error_detail, and whether it
// has one: whether it is a NACK.
func (r wireReq) errorDetail() (string, bool) {
	if r.delta != nil {
		return r.delta.GetErrorDetail().GetMessage(), r.delta.GetErrorDetail() != nil
	}
	return r.sotw.GetErrorDetail().GetMessage(), r.sotw.GetErrorDetail() != nil
}

// readReq reads st's next request; it fails the test if none comes.
func readReq(t *testing.T, st *testutils.FakeStream) wireReq {
	t.Helper()
	r, err := tryReadReq(t, st)
	if err != nil {
		t.Fatalf("stream %d: waiting for a request: %v", st.ID, err)
	}
	return r
}

func tryReadReq(t *testing.T, st *testutils.FakeStream) (wireReq, error) {
	return tryReadReqWithin(t, st, timeout)
}

// readReqWithin is readReq with a deadline of its own.
func readReqWithin(t *testing.T, st *testutils.FakeStream, d time.Duration) wireReq {
	t.Helper()
	r, err := tryReadReqWithin(t, st, d)
	if err != nil {
		t.Fatalf("stream %d: waiting %v for a request: %v", st.ID, d, err)
	}
	return r
}

func tryReadReqWithin(t *testing.T, st *testutils.FakeStream, d time.Duration) (wireReq, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if st.Delta {
		r, err := st.NextDeltaRequest(ctx)
		return wireReq{delta: r}, err
	}
	r, err := st.NextRequest(ctx)
	return wireReq{sotw: r}, err
}

// sendCluster sends msg, a Cluster, as the one resource of a response on
// st: a SotW response at version, or a delta response of the resource at
// version.
func sendCluster(st *testutils.FakeStream, version, nonce string, msg proto.Message) error {
	name := msg.(interface{ GetName() string }).GetName()
	if st.Delta {
		return st.SendDelta(testutils.DeltaResponse(cdsURL, nonce, nil, testutils.WrapResource(name, version, 0, msg)))
	}
	return st.Send(testutils.SotWResponse(cdsURL, version, nonce, msg))
}

func mustSendCluster(t *testing.T, st *testutils.FakeStream, version, nonce string, msg proto.Message) {
	t.Helper()
	if err := sendCluster(st, version, nonce, msg); err != nil {
		t.Fatal(err)
	}
}

// wantACK reads the next request of st and checks it ACKs nonce.
func wantACK(t *testing.T, st *testutils.FakeStream, nonce string) {
	t.Helper()
	checkACK(t, readReq(t, st), nonce)
}

func checkACK(t *testing.T, r wireReq, nonce string) {
	t.Helper()
	if detail, nack := r.errorDetail(); nack || r.nonce() != nonce {
		t.Fatalf("reply (nonce %q, error_detail %q), want an ACK of %q", r.nonce(), detail, nonce)
	}
}

// watchServedC1 watches cluster C1 through c and serves it on the fake's
// next stream, version 1 with nonce: it returns once the server has the
// ACK and the watcher the update.
func watchServedC1(t *testing.T, c *client.Client, fs *testutils.FakeServer, nonce string) (*recorder[*resources.Cluster], *testutils.FakeStream) {
	t.Helper()
	w := newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "C1", w)
	st := nextStreamOf(t, fs)
	readReq(t, st)
	mustSendCluster(t, st, "1", nonce, testutils.Cluster("C1", "eds-1"))
	wantACK(t, st, nonce)
	w.wantUpdate(t, "C1")
	return w, st
}
