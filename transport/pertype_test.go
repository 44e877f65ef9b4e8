package transport_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// Transports with more than one stream per server: per-type streams, and
// ADS with per-type overrides.

func newServerEnv(t *testing.T, server bootstrap.ServerConfig, opts transport.Options) *env {
	t.Helper()
	fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Stop)
	h := newHandler()
	server.ServerURI = fs.Address()
	server.ChannelCreds = []bootstrap.ChannelCreds{{Type: bootstrap.CredsInsecure}}
	tr, err := transport.NewBuilder(opts).Build(server, testNode, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return &env{t: t, fs: fs, h: h, tr: tr}
}

func (e *env) stream() *testutils.FakeStream {
	e.t.Helper()
	st, err := e.fs.NextStream(ctxT(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// Each type has its own stream, of its own service, started by the node.
func TestPerTypeStreamPerType(t *testing.T) {
	e := newServerEnv(t, bootstrap.ServerConfig{APIType: bootstrap.APITypeGRPC}, fastOptions)
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	lds := e.stream()
	e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
	cds := e.stream()
	if lds.TypeURL != ldsURL || cds.TypeURL != cdsURL || lds.Delta || cds.Delta {
		t.Fatalf("streams of %q and %q (delta %v, %v), want StreamListeners then StreamClusters", lds.TypeURL, cds.TypeURL, lds.Delta, cds.Delta)
	}
	for _, c := range []struct {
		st      *testutils.FakeStream
		typeURL string
		name    string
	}{{lds, ldsURL, "L1"}, {cds, cdsURL, "C1"}} {
		r, err := c.st.NextRequest(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		want(t, r, &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: c.typeURL, ResourceNames: []string{c.name}})
	}
	// A second name of a type goes on that type's stream.
	e.tr.UpdateSubscriptions(ldsURL, []string{"L2"}, nil)
	r, err := lds.NextRequest(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	want(t, r, &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, ResourceNames: []string{"L1", "L2"}})
	if n := e.fs.StreamCount(); n != 2 {
		t.Fatalf("%d streams for two types, want 2", n)
	}
}

// Per-type overrides: endpoints on their own delta stream, the rest on one
// SotW ADS stream.
func TestPerTypeOverrideBesideADS(t *testing.T) {
	e := newServerEnv(t, bootstrap.ServerConfig{
		APIType:        bootstrap.APITypeAggregatedGRPC,
		APITypePerType: map[string]bootstrap.APIType{edsURL: bootstrap.APITypeDeltaGRPC},
	}, fastOptions)
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	ads := e.stream()
	e.tr.UpdateSubscriptions(edsURL, []string{"E1"}, nil)
	eds := e.stream()
	e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
	if ads.TypeURL != "" || ads.Delta || eds.TypeURL != edsURL || !eds.Delta {
		t.Fatalf("streams %+v and %+v, want a SotW ADS stream and a delta EDS stream", ads, eds)
	}
	if _, err := ads.NextRequest(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r, err := ads.NextRequest(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	want(t, r, &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1"}}) // same stream: no node
	dr, err := eds.NextDeltaRequest(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	want(t, dr, &discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsURL, ResourceNamesSubscribe: []string{"E1"}})
	if err := eds.SendDelta(testutils.DeltaResponse(edsURL, "d1", nil)); err != nil {
		t.Fatal(err)
	}
	if r := e.h.nextResponse(t); !r.Delta || r.TypeURL != edsURL {
		t.Fatalf("handler got %+v, want the delta EDS response", r)
	}
}

// A type with no per-type service cannot be fetched: its names are
// reported unservable at once, and no stream is opened for it.
func TestPerTypeUnservableType(t *testing.T) {
	const unknownURL = "type.googleapis.com/goxds.test.Unknown"
	e := newServerEnv(t, bootstrap.ServerConfig{APIType: bootstrap.APITypeGRPC}, fastOptions)
	e.tr.UpdateSubscriptions(unknownURL, []string{"X", "Y"}, nil)
	u := e.h.nextUnservable(t)
	if u.typeURL != unknownURL || !slices.Equal(u.names, []string{"X", "Y"}) || !strings.Contains(u.err.Error(), "no service") {
		t.Fatalf("unservable %s %q: %v; want X and Y, for want of a service", u.typeURL, u.names, u.err)
	}
	// The transport still works for the types it has.
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	if st := e.stream(); st.TypeURL != ldsURL {
		t.Fatalf("stream of %q, want the listeners'", st.TypeURL)
	}
}

// Each per-type stream's end is reported on its own, as on ADS, naming the
// stream's types only (the client stops the does-not-exist timers of those
// names, not the other streams'), and whether the server had answered on
// that stream: whether another stream answered meanwhile is for the client
// to judge, which sees them all.
func TestPerTypeStreamEndsReportedPerStream(t *testing.T) {
	e := newServerEnv(t, bootstrap.ServerConfig{APIType: bootstrap.APITypeGRPC}, fastOptions)
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	lds := e.stream()
	if _, err := lds.NextRequest(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	lds.Send(testutils.SotWResponse(ldsURL, "v1", "n1", testutils.Listener("L1", "R1")))
	e.h.nextResponse(t)
	if _, err := lds.NextRequest(ctxT(t)); err != nil { // the ACK
		t.Fatal(err)
	}
	e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
	cds := e.stream()
	if _, err := cds.NextRequest(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	// The cluster stream never answered: so it says, though the listener
	// stream did.
	cds.Cut(status.Error(codes.Unavailable, "no clusters here"))
	wantStreamError(t, e.h.nextStreamErr(t), false, cdsURL)
	cds = e.stream()
	if _, err := cds.NextRequest(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	cds.Cut(status.Error(codes.Unavailable, "no clusters here"))
	wantStreamError(t, e.h.nextStreamErr(t), false, cdsURL)
	// The listener stream answered: its end is routine.
	lds.Cut(status.Error(codes.Unavailable, "rebalancing"))
	wantStreamError(t, e.h.nextStreamErr(t), true, ldsURL)
}

// wantStreamError checks that err is a *transport.StreamError with answered
// and exactly the given types.
func wantStreamError(t *testing.T, err error, answered bool, typeURLs ...string) {
	t.Helper()
	var se *transport.StreamError
	if !errors.As(err, &se) || se.Err == nil {
		t.Fatalf("stream error %v (%T), want a *transport.StreamError", err, err)
	}
	if se.Answered != answered || !slices.Equal(se.TypeURLs, typeURLs) {
		t.Fatalf("stream error %v: answered %v, types %v; want %v, %v", se, se.Answered, se.TypeURLs, answered, typeURLs)
	}
}

func drainSent(h *handler) {
	for {
		select {
		case <-h.sent:
		default:
			return
		}
	}
}

func nextSent(t *testing.T, h *handler) sentNames {
	t.Helper()
	select {
	case s := <-h.sent:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no OnSubscriptionsSent")
	}
	return sentNames{}
}
