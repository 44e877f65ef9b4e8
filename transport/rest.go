package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/bootstrap"
)

// REST-JSON polling (APITypeREST) reuses the runner and the SotW protocol:
// each type has its own runner, and its "stream" is a sequence of HTTP
// requests, one outstanding at a time. The requests are the ones a SotW
// stream would carry; the ACK of a response is the next poll, which a
// long-polling server holds until something changes.

// buildREST returns the transport of a REST server: one poller per type.
func (b grpcBuilder) buildREST(server bootstrap.ServerConfig, node *corev3.Node, h Handler) (Transport, error) {
	hc := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}
	if strings.HasPrefix(server.ServerURI, "https://") {
		cfg, err := server.TLSConfig()
		if err != nil {
			return nil, fmt.Errorf("xDS server %s: %w", server.ServerURI, err)
		}
		hc.TLSClientConfig = cfg
	}
	client := &http.Client{Transport: hc}
	base := strings.TrimSuffix(server.ServerURI, "/")
	opts := b.opts
	logger := opts.Logger.With("server", server.ServerURI, "protocol", server.APIType.String())
	route := func(typeURL string, h Handler) (string, func() *runner, bool) {
		path, ok := restPaths[typeURL]
		if !ok {
			return "", nil, false
		}
		ropts := opts
		ropts.Logger = logger.With("type", typeURL)
		p := restProtocol{
			client:   client,
			url:      base + path,
			typeURL:  typeURL,
			node:     node,
			handler:  h,
			refresh:  server.EffectiveRefreshDelay(),
			timeout:  server.EffectiveRequestTimeout(),
			maxBytes: int64(opts.MaxResponseBytes),
			answered: newRESTAnswered(),
		}
		return typeURL, func() *runner { return newRunner(p, h, node, ropts) }, true
	}
	return newMux(h, logger, route, hc.CloseIdleConnections), nil
}

// restProtocol is the SotW protocol over REST polls of one type.
type restProtocol struct {
	sotwProtocol
	client   *http.Client
	url      string
	typeURL  string
	node     *corev3.Node // on every request: each poll stands alone
	handler  Handler
	refresh  time.Duration
	timeout  time.Duration
	maxBytes int64
	// answered: what each recent version was the answer to. It outlives
	// the polls' "streams", as the accepted version does.
	answered *restAnswered
}

// restAnswered remembers, for the versions of the last answers of a type,
// the names of the poll each answered, less those polled without since.
//
// A poll stands alone: its version_info is all a server knows of what the
// client holds, and a server that finds it current answers "not modified"
// (go-control-plane's REST handler does, whatever names the poll lists:
// snapshotCache.Fetch compares versions only). A poll that names something
// the answer at its version was not asked for would then never be
// answered, until the next change; it goes out with no version, so that it
// is answered at once, with everything asked for (what the client holds
// unchanged is recognised and not delivered again). A name polled without
// (unsubscribed) leaves every entry: the client forgets it, and must get it
// again if it wants it back.
type restAnswered struct {
	mu        sync.Mutex
	byVersion map[string]map[string]bool
	order     []string // versions, oldest first; at most restAnsweredMax
}

// restAnsweredMax bounds the versions remembered: the client's next poll
// carries the version of the last answer, or of the one it last accepted
// before it (a NACK), so a few are plenty.
const restAnsweredMax = 4

func newRESTAnswered() *restAnswered {
	return &restAnswered{byVersion: make(map[string]map[string]bool)}
}

// covers forgets, in every entry, the names not in names, and tells whether
// the answer at version was to a poll naming every one of names.
func (a *restAnswered) covers(version string, names []string) bool {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, got := range a.byVersion {
		for n := range got {
			if !want[n] {
				delete(got, n)
			}
		}
	}
	got := a.byVersion[version]
	for _, n := range names {
		if !got[n] {
			return false
		}
	}
	return true
}

// record notes that the answer at version was to a poll naming names.
func (a *restAnswered) record(version string, names []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.byVersion[version]; !ok {
		if len(a.order) == restAnsweredMax {
			delete(a.byVersion, a.order[0])
			a.order = a.order[1:]
		}
		a.order = append(a.order, version)
	}
	got := make(map[string]bool, len(names))
	for _, n := range names {
		got[n] = true
	}
	a.byVersion[version] = got
}

// requestLocked builds the request as a SotW stream would after it named
// something: the wildcard always as "*". A poll stands alone, with no stream
// whose history could give an empty list its legacy meaning or take it
// away, so the poller spells a wildcard-only poll in the legacy form itself
// (see restStream.post).
func (p restProtocol) requestLocked(ts *typeState, node *corev3.Node, now time.Time) (proto.Message, []string, *reply) {
	ts.namedOnStream = true
	// A poll's reply is not paired by a nonce that a crossing request could
	// make stale, and each poll costs a round trip: a reply and a change go
	// out in one.
	return p.request(ts, node, now, false)
}

func (p restProtocol) openStream(ctx context.Context) (wireStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &restStream{
		p:       p,
		ctx:     ctx,
		cancel:  cancel,
		wake:    make(chan struct{}, 1),
		results: make(chan restResult),
		done:    make(chan struct{}),
	}
	go s.poll()
	return s, nil
}

// restStream is one run of polls: it lasts until a poll fails. send
// replaces the request to poll with; the poller posts it, and after an
// answer that changed nothing (HTTP 304) posts it again once the refresh
// delay has passed. A new request cancels a poll in flight.
type restStream struct {
	p      restProtocol
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // capacity 1: next changed
	// results carries each response, or the error that ends the stream,
	// from the poller to recv.
	results chan restResult
	done    chan struct{} // closed when the poller returns

	mu       sync.Mutex
	next     *discoveryv3.DiscoveryRequest // to post; nil when taken or when nothing is wanted; guarded by mu
	gen      int                           // counts sends; guarded by mu
	inflight context.CancelFunc            // cancels the poll in flight; guarded by mu
	// stopped is set when a send wanted nothing, so polling stopped; the
	// poller then forgets what it reported. Guarded by mu.
	stopped bool

	// Poller only: the names the client was last told reached the server.
	reported []string
	told     bool
}

type restResult struct {
	resp *Response
	err  error
}

func (s *restStream) reportsSubscriptions() {}

func (s *restStream) send(m proto.Message) error {
	req := proto.Clone(m).(*discoveryv3.DiscoveryRequest)
	req.Node = s.p.node
	s.mu.Lock()
	if len(req.GetResourceNames()) == 0 {
		// Nothing is wanted. A poll naming nothing would ask for
		// everything (the legacy wildcard), so polling stops instead.
		// The client forgets what it no longer wants: names polled for
		// again are news to it, to be reported again.
		req = nil
		s.stopped = true
	}
	s.next = req
	s.gen++
	if s.inflight != nil {
		s.inflight()
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

func (s *restStream) recv() (*Response, error) {
	select {
	case r := <-s.results:
		return r.resp, r.err
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func (s *restStream) close() {
	s.cancel()
	<-s.done
}

// take waits for a request to post, and returns it with the number of the
// send that gave it; nil once the stream is over.
func (s *restStream) take() (*discoveryv3.DiscoveryRequest, int) {
	for {
		s.mu.Lock()
		req, gen := s.next, s.gen
		s.next = nil
		if s.stopped {
			s.stopped, s.told = false, false
		}
		s.mu.Unlock()
		if req != nil {
			return req, gen
		}
		select {
		case <-s.wake:
		case <-s.ctx.Done():
			return nil, 0
		}
	}
}

// superseded reports whether send was called after send number gen.
func (s *restStream) superseded(gen int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen != gen
}

func (s *restStream) poll() {
	defer close(s.done)
	for {
		req, gen := s.take()
		if req == nil {
			return
		}
		for {
			resp, notModified, err := s.post(req, gen)
			if s.ctx.Err() != nil {
				return
			}
			if err != nil && s.superseded(gen) {
				break // cancelled for a newer request
			}
			if err != nil {
				s.deliver(restResult{err: err})
				return
			}
			if !notModified {
				s.p.answered.record(resp.Version, req.GetResourceNames())
				s.deliver(restResult{resp: resp})
				break // the client's reply is the next poll
			}
			// Nothing changed: ask again later, unless a new request
			// comes first.
			t := time.NewTimer(s.p.refresh)
			s.refreshWait(gen, t.C)
			t.Stop()
			if s.ctx.Err() != nil {
				return
			}
			if s.superseded(gen) {
				break
			}
		}
	}
}

// refreshWait waits, after a poll of send number gen was answered "not
// modified", until tick fires (the refresh delay), a newer send comes or
// the stream ends. A wake of send gen itself is stale (take found its
// request before it drained the wake), and does not cut the wait short:
// it would poll the server again at once with the same request.
func (s *restStream) refreshWait(gen int, tick <-chan time.Time) {
	for {
		select {
		case <-tick:
			return
		case <-s.wake:
			if s.superseded(gen) {
				return
			}
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *restStream) deliver(r restResult) {
	select {
	case s.results <- r:
	case <-s.ctx.Done():
	}
}

// post sends one poll, the one send number gen gave, and waits for its
// answer, telling the client of the names it carries once the request is
// written.
func (s *restStream) post(req *discoveryv3.DiscoveryRequest, gen int) (resp *Response, notModified bool, err error) {
	wire := req
	clone := func() {
		if wire == req {
			wire = proto.Clone(req).(*discoveryv3.DiscoveryRequest)
		}
	}
	if v := req.GetVersionInfo(); v != "" && !s.p.answered.covers(v, req.GetResourceNames()) {
		// Names the answer at v was not asked for (see restAnswered).
		clone()
		wire.VersionInfo = ""
	}
	if names := req.GetResourceNames(); len(names) == 1 && names[0] == wildcardName {
		// The wildcard alone: an empty list, which every server reads as
		// everything, where some (go-control-plane's snapshot cache) would
		// look for a resource named "*".
		clone()
		wire.ResourceNames = nil
	}
	body, err := protojson.Marshal(wire)
	if err != nil {
		return nil, false, fmt.Errorf("encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.p.timeout)
	defer cancel()
	s.mu.Lock()
	if s.gen != gen {
		// A send came after take, before this poll could be cancelled: it
		// is superseded already. Posted, it could be held until the
		// server's long poll ends, the newer request waiting behind it.
		s.mu.Unlock()
		return nil, false, context.Canceled
	}
	s.inflight = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight = nil
		s.mu.Unlock()
	}()

	wrote := make(chan struct{}, 1)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				select {
				case wrote <- struct{}{}:
				default:
				}
			}
		},
	})
	type answer struct {
		resp        *Response
		notModified bool
		err         error
	}
	answered := make(chan answer, 1)
	go func() {
		var a answer
		a.resp, a.notModified, a.err = s.roundTrip(ctx, body)
		answered <- a
	}()
	// The trace may call WroteRequest more than once, from net/http's
	// goroutines: a poll written to a reused connection that turns out dead
	// with nothing sent is retried on a new one. So the callback only ever
	// reads wrote, and the loop stops listening through a copy of its own.
	written := (<-chan struct{})(wrote)
	for {
		select {
		case <-written:
			s.report(req)
			written = nil
		case a := <-answered:
			if written != nil && len(written) > 0 {
				s.report(req)
			}
			if a.err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && s.ctx.Err() == nil {
				a.err = fmt.Errorf("no answer within the request timeout of %v: %w", s.p.timeout, a.err)
			}
			return a.resp, a.notModified, a.err
		}
	}
}

func (s *restStream) roundTrip(ctx context.Context, body []byte) (*Response, bool, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, s.p.url, bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hresp, err := s.p.client.Do(hreq)
	if err != nil {
		return nil, false, err
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, s.p.maxBytes+1))
	if err != nil {
		return nil, false, fmt.Errorf("read response: %w", err)
	}
	switch {
	case hresp.StatusCode == http.StatusNotModified:
		return nil, true, nil
	case hresp.StatusCode != http.StatusOK:
		msg := strings.TrimSpace(string(data[:min(len(data), 512)]))
		return nil, false, fmt.Errorf("POST %s: %s: %s", s.p.url, hresp.Status, msg)
	case int64(len(data)) > s.p.maxBytes:
		return nil, false, fmt.Errorf("POST %s: response larger than %d bytes", s.p.url, s.p.maxBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, false, fmt.Errorf("POST %s: empty response", s.p.url)
	}
	m := &discoveryv3.DiscoveryResponse{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, m); err != nil {
		return nil, false, fmt.Errorf("POST %s: decode response: %w", s.p.url, err)
	}
	typeURL := m.GetTypeUrl()
	if typeURL == "" {
		typeURL = s.p.typeURL // optional on a per-type API
	}
	return &Response{
		TypeURL:        typeURL,
		Version:        m.GetVersionInfo(),
		Nonce:          m.GetNonce(),
		Resources:      m.GetResources(),
		ResourceErrors: m.GetResourceErrors(),
		ControlPlane:   m.GetControlPlane().GetIdentifier(),
	}, false, nil
}

// report tells the client that the server has the names of req, if they
// are not the ones it was last told of on this stream.
func (s *restStream) report(req *discoveryv3.DiscoveryRequest) {
	names := req.GetResourceNames()
	if s.told && slices.Equal(names, s.reported) {
		return
	}
	s.told, s.reported = true, names
	s.p.handler.OnSubscriptionsSent(req.GetTypeUrl(), slices.Clone(names))
}
