package transport

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// sentHandler is a Handler that records OnSubscriptionsSent.
type sentHandler struct{ sent chan []string }

func (h sentHandler) OnResponse(*Response, func()) error { return nil }
func (h sentHandler) OnSubscriptionsSent(_ string, names []string) {
	h.sent <- names
}
func (h sentHandler) OnStreamError(*StreamError)                {}
func (h sentHandler) OnUnservable(string, []string, error)      {}
func (h sentHandler) ResourceVersions(string) map[string]string { return nil }

// net/http calls a trace's WroteRequest once per attempt: a POST written to
// the buffer of a reused keep-alive connection that the server had closed
// (flushing fails, nothing was sent) is retried on a new connection, and
// written again, from another goroutine, after the poller has heard of the
// first write (persistConn.shouldRetryRequest, nothingWrittenError). The
// second call must not race with the poller, which go test -race checks: the
// poller used to stop listening by setting to nil the very variable the
// callback reads. The names are reported once, and the answer delivered.
func TestRESTPollWrittenTwice(t *testing.T) {
	const cdsURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	h := sentHandler{sent: make(chan []string, 10)}
	body, err := protojson.Marshal(&discoveryv3.DiscoveryResponse{TypeUrl: cdsURL, VersionInfo: "1", Nonce: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		trace := httptrace.ContextClientTrace(r.Context())
		trace.WroteRequest(httptrace.WroteRequestInfo{}) // into the dead connection's buffer
		select {
		case <-h.sent: // the poller has heard of it
		case <-time.After(10 * time.Second):
			t.Error("the first write was not reported")
		}
		trace.WroteRequest(httptrace.WroteRequestInfo{}) // the retry, on a new connection
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
	})
	p := restProtocol{
		client:   &http.Client{Transport: rt},
		url:      "http://xds.test/v3/discovery:clusters",
		typeURL:  cdsURL,
		handler:  h,
		refresh:  time.Hour,
		timeout:  10 * time.Second,
		maxBytes: 1 << 20,
		answered: newRESTAnswered(),
	}
	ws, err := p.openStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s := ws.(*restStream)
	defer s.close()
	if err := s.send(&discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.recv()
	if err != nil || resp.Version != "1" {
		t.Fatalf("recv: %+v, %v; want the response at version 1", resp, err)
	}
	select {
	case names := <-h.sent:
		t.Fatalf("names %q reported again for the same poll", names)
	default:
	}
}

// A send that comes after the poller took a request and before that poll
// could be cancelled (it was not in flight yet) still supersedes it: the
// poll is given up at once, not held by a long-polling server while the
// newer request waits behind it.
func TestRESTPollSupersededBeforeItWentOut(t *testing.T) {
	const cdsURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	held := make(chan struct{}, 1)
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		held <- struct{}{}
		// A long poll: nothing changes until the client gives up.
		<-r.Context().Done()
		return nil, r.Context().Err()
	})
	p := restProtocol{
		client:   &http.Client{Transport: rt},
		url:      "http://xds.test/v3/discovery:clusters",
		typeURL:  cdsURL,
		handler:  sentHandler{sent: make(chan []string, 10)},
		refresh:  time.Hour,
		timeout:  time.Hour,
		maxBytes: 1 << 20,
		answered: newRESTAnswered(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The poller's steps, one by one, with no poller goroutine.
	s := &restStream{p: p, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), results: make(chan restResult), done: make(chan struct{})}
	if err := s.send(&discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	req, gen := s.take()
	if err := s.send(&discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	posted := make(chan error, 1)
	go func() {
		_, _, err := s.post(req, gen)
		posted <- err
	}()
	select {
	case err := <-posted:
		if err == nil || !s.superseded(gen) {
			t.Fatalf("post of the superseded poll: %v, want it given up", err)
		}
	case <-held:
		t.Fatal("the superseded poll went out, to be held by the server")
	case <-time.After(10 * time.Second):
		t.Fatal("post of the superseded poll did not return")
	}
}

// A poll answered "not modified" waits out the refresh delay even when a
// wake of the send it carries comes during the wait: that wake is stale
// (take found the request before it drained the wake: the client's send
// came while the poller was busy, delivering the previous answer), and
// ending the wait for it would poll the same request again at once. The
// race is set up step by step: the stream's wake channel is unbuffered,
// so the test knows when the wait has taken the stale wake, and the
// refresh delay is a channel the test fires; a wait that ends before it
// takes the tick was cut short. A newer send still ends the wait.
func TestRESTRefreshWaitIgnoresStaleWake(t *testing.T) {
	const cdsURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &restStream{p: restProtocol{typeURL: cdsURL}, ctx: ctx, cancel: cancel, wake: make(chan struct{}),
		results: make(chan restResult), done: make(chan struct{})}
	if err := s.send(&discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	req, gen := s.take()
	if req == nil {
		t.Fatal("take: no request")
	}

	wait := func(tick <-chan time.Time) <-chan struct{} {
		returned := make(chan struct{})
		go func() {
			s.refreshWait(gen, tick)
			close(returned)
		}()
		return returned
	}
	tick := make(chan time.Time) // unbuffered: sent only once the wait takes it
	returned := wait(tick)
	select {
	case s.wake <- struct{}{}: // the stale wake of send gen, taken by the wait
	case <-time.After(10 * time.Second):
		t.Fatal("the refresh wait did not take the wake")
	}
	select {
	case tick <- time.Now():
	case <-returned:
		t.Fatal("the stale wake of the poll's own send ended the refresh wait: the same request would be polled again at once")
	case <-time.After(10 * time.Second):
		t.Fatal("the refresh wait did not take the tick")
	}
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the refresh wait did not end at the tick")
	}

	// A newer request ends the wait with no tick. Its own wake may be
	// dropped (the wait not yet listening), so one more is given.
	returned = wait(nil)
	if err := s.send(&discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case s.wake <- struct{}{}:
		<-returned
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("a newer send did not end the refresh wait")
	}
}
