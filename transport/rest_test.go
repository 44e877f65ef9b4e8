package transport_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// REST-JSON polling against a scripted HTTP server: each poll waits for the
// test to answer it, so a test sees the exact requests and plays a server
// that holds polls (long polling), answers 304, or fails.

// restCall is one poll the scripted server received.
type restCall struct {
	path   string
	req    *discoveryv3.DiscoveryRequest
	at     time.Time
	answer chan restAnswer
	gone   <-chan struct{} // closed when the client gave up on the poll
}

type restAnswer struct {
	status int
	resp   *discoveryv3.DiscoveryResponse
}

func (c *restCall) reply(status int, resp *discoveryv3.DiscoveryResponse) {
	select {
	case c.answer <- restAnswer{status, resp}:
	case <-c.gone:
	}
}

type restEnv struct {
	t     *testing.T
	calls chan *restCall
	h     *handler
	tr    transport.Transport
	url   string
}

func newRESTEnv(t *testing.T, server bootstrap.ServerConfig, opts transport.Options) *restEnv {
	t.Helper()
	e := &restEnv{t: t, calls: make(chan *restCall, 100), h: newHandler()}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := &discoveryv3.DiscoveryRequest{}
		if err := protojson.Unmarshal(body, req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c := &restCall{path: r.URL.Path, req: req, at: time.Now(), answer: make(chan restAnswer, 1), gone: r.Context().Done()}
		e.calls <- c
		select {
		case a := <-c.answer:
			if a.resp != nil {
				out, _ := protojson.Marshal(a.resp)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(a.status)
				w.Write(out)
				return
			}
			w.WriteHeader(a.status)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hs.Close) // after the transport closed, which ends every poll
	e.url = hs.URL
	server.ServerURI = hs.URL
	server.APIType = bootstrap.APITypeREST
	server.ChannelCreds = []bootstrap.ChannelCreds{{Type: bootstrap.CredsInsecure}}
	if err := (&bootstrap.Config{Servers: []bootstrap.ServerConfig{server}}).Validate(); err != nil {
		t.Fatal(err)
	}
	tr, err := transport.NewBuilder(opts).Build(server, testNode, e.h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	e.tr = tr
	return e
}

func (e *restEnv) next() *restCall {
	e.t.Helper()
	select {
	case c := <-e.calls:
		return c
	case <-time.After(10 * time.Second):
		e.t.Fatal("no poll reached the server")
	}
	return nil
}

// The polls of a type: the node on every one (each stands alone), the names
// wanted, and the version last accepted, which is how a poll ACKs; a NACK
// keeps the version and says why. An answer that changes nothing (304)
// is asked again after the refresh delay.
func TestRESTPollsEchoTheAcceptedVersion(t *testing.T) {
	const refresh = 50 * time.Millisecond
	e := newRESTEnv(t, bootstrap.ServerConfig{RefreshDelay: refresh}, fastOptions)
	e.tr.UpdateSubscriptions(ldsURL, []string{"L2", "L1"}, nil)
	c := e.next()
	if c.path != "/v3/discovery:listeners" {
		t.Fatalf("poll of %s, want /v3/discovery:listeners", c.path)
	}
	want(t, c.req, &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: ldsURL, ResourceNames: []string{"L1", "L2"}})
	if s := nextSent(t, e.h); s.typeURL != ldsURL || len(s.names) != 2 {
		t.Fatalf("OnSubscriptionsSent(%v), want the two listeners", s)
	}
	c.reply(http.StatusOK, testutils.SotWResponse(ldsURL, "v1", "n1", testutils.Listener("L1", "R1")))
	if r := e.h.nextResponse(t); r.Version != "v1" || r.Nonce != "n1" || len(r.Resources) != 1 || r.Delta {
		t.Fatalf("handler got %+v", r)
	}
	c = e.next() // the ACK is the next poll
	want(t, c.req, &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: ldsURL, VersionInfo: "v1", ResourceNames: []string{"L1", "L2"}, ResponseNonce: "n1"})
	c.reply(http.StatusNotModified, nil)
	again := e.next()
	want(t, again.req, c.req)
	if gap := again.at.Sub(c.at); gap < refresh*9/10 {
		t.Fatalf("polled again %v after a 304, before the %v refresh delay", gap, refresh)
	}

	e.h.setVerdict(func(*transport.Response) error { return errRejected })
	again.reply(http.StatusOK, testutils.SotWResponse(ldsURL, "v2", "n2", testutils.Listener("L1", "")))
	e.h.nextResponse(t)
	want(t, e.next().req, &discoveryv3.DiscoveryRequest{
		Node: testNode, TypeUrl: ldsURL, VersionInfo: "v1", ResourceNames: []string{"L1", "L2"}, ResponseNonce: "n2",
		ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: errRejected.Error()},
	})
}

// A poll the server holds (long polling) is given up for a new one when the
// subscriptions change: one outstanding request at a time, the latest.
func TestRESTLongPollSupersededBySubscriptionChange(t *testing.T) {
	e := newRESTEnv(t, bootstrap.ServerConfig{}, fastOptions)
	e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
	c := e.next()
	c.reply(http.StatusOK, testutils.SotWResponse(cdsURL, "v1", "n1", testutils.Cluster("C1", "")))
	e.h.nextResponse(t)
	held := e.next() // held: nothing changed
	drainSent(e.h)
	e.tr.UpdateSubscriptions(cdsURL, []string{"C2"}, nil)
	c = e.next()
	select {
	case <-held.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the held poll was not given up")
	}
	// No version: v1 was the answer to a poll of C1 alone (see
	// TestRESTNewNamePollsWithoutVersion).
	want(t, c.req, &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: cdsURL, ResourceNames: []string{"C1", "C2"}, ResponseNonce: "n1"})
	if s := nextSent(t, e.h); len(s.names) != 2 {
		t.Fatalf("OnSubscriptionsSent(%v), want both clusters", s)
	}
	// Each type polls on its own.
	e.tr.UpdateSubscriptions(edsURL, []string{"E1"}, nil)
	if c := e.next(); c.path != "/v3/discovery:endpoints" {
		t.Fatalf("poll of %s, want the endpoints'", c.path)
	}
}

// A poll stands alone, and its version is all the server knows of what the
// client holds: a server that finds it current answers "not modified",
// whatever names the poll lists (go-control-plane's REST handler does). So a
// poll naming something the answer at the accepted version was not asked
// for carries no version, and is answered with everything; the poll after
// carries the version again. A name unsubscribed and wanted again is such a
// name: the client forgot it.
func TestRESTNewNamePollsWithoutVersion(t *testing.T) {
	e := newRESTEnv(t, bootstrap.ServerConfig{}, fastOptions)
	e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
	e.next().reply(http.StatusOK, testutils.SotWResponse(cdsURL, "v1", "n1", testutils.Cluster("C1", "")))
	e.h.nextResponse(t)
	held := e.next()
	want(t, held.req, &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"C1"}, ResponseNonce: "n1"})

	e.tr.UpdateSubscriptions(cdsURL, []string{"C2"}, nil)
	c := e.next()
	want(t, c.req, &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: cdsURL, ResourceNames: []string{"C1", "C2"}, ResponseNonce: "n1"})
	c.reply(http.StatusOK, testutils.SotWResponse(cdsURL, "v1", "n2", testutils.Cluster("C1", ""), testutils.Cluster("C2", "")))
	e.h.nextResponse(t)
	want(t, e.next().req, &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"C1", "C2"}, ResponseNonce: "n2"})

	e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C2"})
	want(t, e.next().req, &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: cdsURL, VersionInfo: "v1", ResourceNames: []string{"C1"}, ResponseNonce: "n2"})
	e.tr.UpdateSubscriptions(cdsURL, []string{"C2"}, nil)
	want(t, e.next().req, &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: cdsURL, ResourceNames: []string{"C1", "C2"}, ResponseNonce: "n2"})
}

// Nothing wanted of a type: polling stops, since a poll naming nothing
// would ask for everything (the legacy wildcard).
func TestRESTUnsubscribeAllStopsPolling(t *testing.T) {
	e := newRESTEnv(t, bootstrap.ServerConfig{}, fastOptions)
	e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
	held := e.next()
	e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C1"})
	<-held.gone
	e.tr.UpdateSubscriptions(cdsURL, []string{"C2"}, nil)
	if c := e.next(); len(c.req.ResourceNames) != 1 || c.req.ResourceNames[0] != "C2" {
		t.Fatalf("poll %v, want the next one to name C2 only", c.req)
	}
}

// Server errors and timeouts back off like a failed stream. Every failure
// is reported: after an answer as routine (Answered); without one, as
// routine once more if the server answered since the last failure reported
// unanswered, then as a failure. The polls after a failure carry the last
// accepted version.
func TestRESTServerErrorsBackOff(t *testing.T) {
	opts := transport.Options{
		Backoff:           backoff.Config{BaseDelay: 80 * time.Millisecond, Multiplier: 2, MaxDelay: time.Second},
		MinStreamInterval: time.Millisecond,
	}
	e := newRESTEnv(t, bootstrap.ServerConfig{}, opts)
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	e.next().reply(http.StatusOK, testutils.SotWResponse(ldsURL, "v1", "n1"))
	e.h.nextResponse(t)
	e.next().reply(http.StatusInternalServerError, nil)
	wantStreamError(t, e.h.nextStreamErr(t), true, ldsURL)
	c := e.next() // at once: the failed "stream" had answered
	want(t, c.req, &discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: ldsURL, VersionInfo: "v1", ResourceNames: []string{"L1"}})
	c.reply(http.StatusServiceUnavailable, nil)
	err := e.h.nextStreamErr(t)
	if !strings.Contains(err.Error(), "503") {
		t.Fatalf("stream error %v, want the 503", err)
	}
	// This "stream" had no answer (the client judges whether an earlier
	// one's makes it routine).
	wantStreamError(t, err, false, ldsURL)
	c2 := e.next()
	if gap := c2.at.Sub(c.at); gap < 70*time.Millisecond {
		t.Fatalf("polled again %v after a failure, want the 80ms backoff", gap)
	}
	c2.reply(http.StatusServiceUnavailable, nil)
	wantStreamError(t, e.h.nextStreamErr(t), false, ldsURL)
	if gap := e.next().at.Sub(c2.at); gap < 140*time.Millisecond {
		t.Fatalf("polled again %v after a second failure, want the 160ms backoff", gap)
	}
	select {
	case err := <-e.h.streamErrs:
		t.Fatalf("extra stream error %v", err)
	default:
	}
}

// A server that holds a poll past the request timeout has failed.
func TestRESTRequestTimeout(t *testing.T) {
	e := newRESTEnv(t, bootstrap.ServerConfig{RequestTimeout: 100 * time.Millisecond}, fastOptions)
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	e.next() // never answered
	if err := e.h.nextStreamErr(t); !strings.Contains(err.Error(), "request timeout") {
		t.Fatalf("stream error %v, want the timeout", err)
	}
	e.next() // and polled again
}

// Names count as sent only once a poll carrying them is written to the
// server: against a server that accepts no connection, none is.
func TestRESTNamesSentOnlyWhenWritten(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	h := newHandler()
	server := bootstrap.ServerConfig{ServerURI: "http://" + addr, APIType: bootstrap.APITypeREST,
		ChannelCreds: []bootstrap.ChannelCreds{{Type: bootstrap.CredsInsecure}}}
	tr, err := transport.NewBuilder(fastOptions).Build(server, testNode, h)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	for range 3 {
		h.nextStreamErr(t)
	}
	select {
	case s := <-h.sent:
		t.Fatalf("OnSubscriptionsSent(%v) with no server", s)
	default:
	}
}

// Against go-control-plane's REST handler (testutils.RESTServer) holding
// polls: an update answers the held poll at once.
func TestRESTWithLongPollingServer(t *testing.T) {
	rs, err := testutils.StartRESTServer(testutils.RESTServerOptions{LongPoll: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rs.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := testutils.Resources{Clusters: testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc"}).Clusters}
	if err := rs.Update(ctx, testNode.Id, res); err != nil {
		t.Fatal(err)
	}
	h := newHandler()
	server := bootstrap.ServerConfig{ServerURI: rs.URL(), APIType: bootstrap.APITypeREST,
		ChannelCreds: []bootstrap.ChannelCreds{{Type: bootstrap.CredsInsecure}}}
	tr, err := transport.NewBuilder(fastOptions).Build(server, testNode, h)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.UpdateSubscriptions(cdsURL, []string{"*"}, nil)
	if r := h.nextResponse(t); !strings.HasSuffix(r.Version, "-1") || len(r.Resources) != 1 {
		t.Fatalf("first response %+v, want version 1 with the one cluster", r)
	}
	res.Clusters = append(res.Clusters, testutils.Cluster("other", ""))
	if err := rs.Update(ctx, testNode.Id, res); err != nil {
		t.Fatal(err)
	}
	if r := h.nextResponse(t); !strings.HasSuffix(r.Version, "-2") || len(r.Resources) != 2 {
		t.Fatalf("second response %+v, want version 2 with both clusters", r)
	}
}
