package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// The tests in this package drive the client through an in-memory
// transport: they hand it responses directly and read the subscriptions it
// asks for, so every apply rule can be checked exactly and fast. Protocol
// tests over a real gRPC stream live in the transport package and in
// client/test.

const testTimeout = 10 * time.Second

// testValue is the decoded value of the test types: a name and a payload.
type testValue struct {
	name    string
	payload string
	raw     proto.Message
}

func (v *testValue) ResourceName() string { return v.name }
func (v *testValue) Proto() proto.Message { return v.raw }

// decodes counts calls to the test decoders, to prove unchanged resources
// are not decoded again.
var decodes atomic.Int64

// wholeWorldType stands in for Listener: SotW responses carry every resource.
// A listener whose stat_prefix is "invalid" fails validation.
var wholeWorldType = resources.NewType(resources.TypeOptions[*testValue]{
	TypeURL:                    resources.ListenerTypeURL,
	TypeName:                   "Listener",
	AllResourcesRequiredInSotW: true,
	SupportsWildcard:           true,
	Decode: func(_ *resources.DecodeContext, a *anypb.Any) (string, *testValue, error) {
		decodes.Add(1)
		var l listenerv3.Listener
		if err := proto.Unmarshal(a.GetValue(), &l); err != nil {
			return "", nil, err
		}
		if l.GetStatPrefix() == "invalid" {
			return l.GetName(), nil, errors.New("stat_prefix: invalid")
		}
		return l.GetName(), &testValue{name: l.GetName(), payload: l.GetStatPrefix(), raw: &l}, nil
	},
})

// partialType stands in for RouteConfiguration: SotW responses may carry a
// subset. A route config whose internal_only_headers holds "invalid" fails.
var partialType = resources.NewType(resources.TypeOptions[*testValue]{
	TypeURL:  resources.RouteConfigTypeURL,
	TypeName: "RouteConfiguration",
	Decode: func(_ *resources.DecodeContext, a *anypb.Any) (string, *testValue, error) {
		decodes.Add(1)
		var rc routev3.RouteConfiguration
		if err := proto.Unmarshal(a.GetValue(), &rc); err != nil {
			return "", nil, err
		}
		payload := ""
		if h := rc.GetInternalOnlyHeaders(); len(h) > 0 {
			payload = h[0]
		}
		if payload == "invalid" {
			return rc.GetName(), nil, errors.New("internal_only_headers: invalid")
		}
		return rc.GetName(), &testValue{name: rc.GetName(), payload: payload, raw: &rc}, nil
	},
})

func lis(name, payload string) *anypb.Any {
	return mustAny(&listenerv3.Listener{Name: name, StatPrefix: payload})
}

func rc(name, payload string) *anypb.Any {
	return mustAny(&routev3.RouteConfiguration{Name: name, InternalOnlyHeaders: []string{payload}})
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

func wrapped(name, version string, ttl time.Duration, body *anypb.Any) *discoveryv3.Resource {
	r := &discoveryv3.Resource{Name: name, Version: version, Resource: body}
	if ttl > 0 {
		r.Ttl = durationpb.New(ttl)
	}
	return r
}

// fakeTransport records what the client subscribes to.
type fakeTransport struct {
	handler transport.Handler
	server  bootstrap.ServerConfig

	mu      sync.Mutex
	names   map[string]map[string]bool // type URL → names
	updates chan subUpdate
	closed  bool
	closedC chan struct{} // closed by Close
	// answered: a response was handed over since the last fail, which is
	// how the stream a test fails had answered or not.
	answered atomic.Bool
}

// fail ends the fake's stream as a transport would: a StreamError that
// says whether a response came since the last end, naming every type
// subscribed.
func (f *fakeTransport) fail(err error) {
	f.mu.Lock()
	types := make([]string, 0, len(f.names))
	for u := range f.names {
		types = append(types, u)
	}
	f.mu.Unlock()
	if len(types) == 0 {
		types = []string{resources.ListenerTypeURL}
	}
	f.handler.OnStreamError(&transport.StreamError{Err: err, Answered: f.answered.Swap(false), TypeURLs: types})
}

type subUpdate struct {
	typeURL     string
	add, remove []string
}

func (f *fakeTransport) UpdateSubscriptions(typeURL string, add, remove []string) {
	f.mu.Lock()
	if f.names[typeURL] == nil {
		f.names[typeURL] = make(map[string]bool)
	}
	for _, n := range add {
		f.names[typeURL][n] = true
	}
	for _, n := range remove {
		delete(f.names[typeURL], n)
	}
	f.mu.Unlock()
	select {
	case f.updates <- subUpdate{typeURL: typeURL, add: add, remove: remove}:
	default:
		// Nobody is reading them (the fuzz target does not): never block
		// the client over it. The names are still in f.names.
	}
}

func (f *fakeTransport) Close() {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.closedC)
	}
	f.mu.Unlock()
}

func (f *fakeTransport) subscribed(typeURL string) map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]bool)
	for n := range f.names[typeURL] {
		out[n] = true
	}
	return out
}

type fakeBuilder struct{ built chan *fakeTransport }

func (b *fakeBuilder) Build(s bootstrap.ServerConfig, _ *corev3.Node, h transport.Handler) (transport.Transport, error) {
	ft := &fakeTransport{handler: h, server: s, names: make(map[string]map[string]bool),
		updates: make(chan subUpdate, 1000), closedC: make(chan struct{})}
	b.built <- ft
	return ft, nil
}

// harness is a client over fake transports.
type harness struct {
	t       *testing.T
	c       *Client
	builder *fakeBuilder
	ft      *fakeTransport // transport of the top-level server, once built
}

func testBootstrap(features ...string) *bootstrap.Config {
	return &bootstrap.Config{
		Servers: []bootstrap.ServerConfig{{
			ServerURI:      "xds.example.com:443",
			ChannelCreds:   []bootstrap.ChannelCreds{{Type: "insecure"}},
			ServerFeatures: features,
		}},
		Node: bootstrap.Node{ID: "test-node"},
	}
}

func newHarness(t *testing.T, cfg *bootstrap.Config, opts Options) *harness {
	t.Helper()
	if cfg == nil {
		cfg = testBootstrap()
	}
	b := &fakeBuilder{built: make(chan *fakeTransport, 10)}
	opts.TransportBuilder = b
	if opts.Logger == nil {
		// Tests NACK and lose servers on purpose: not to the default
		// logger, which would print it.
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ResourceTypes == nil {
		opts.ResourceTypes = []resources.AnyType{wholeWorldType, partialType}
	}
	c, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return &harness{t: t, c: c, builder: b}
}

// transport returns the transport of the top-level server, waiting for the
// client to build it.
func (h *harness) transport() *fakeTransport {
	h.t.Helper()
	if h.ft == nil {
		select {
		case h.ft = <-h.builder.built:
		case <-time.After(testTimeout):
			h.t.Fatal("no transport built")
		}
	}
	return h.ft
}

// nextSubs waits for the next subscription change handed to the transport.
func (h *harness) nextSubs() subUpdate {
	h.t.Helper()
	select {
	case u := <-h.transport().updates:
		return u
	case <-time.After(testTimeout):
		h.t.Fatal("no subscription update")
	}
	return subUpdate{}
}

// respond hands a response to the client and returns its verdict once the
// client has told its watchers (done was called).
func (h *harness) respond(r *transport.Response) error {
	h.t.Helper()
	done := make(chan struct{})
	h.transport().answered.Store(true)
	err := h.transport().handler.OnResponse(r, func() { close(done) })
	select {
	case <-done:
	case <-time.After(testTimeout):
		h.t.Fatal("response never done")
	}
	return err
}

func (h *harness) sotw(typeURL, version string, res ...*anypb.Any) error {
	h.t.Helper()
	return h.respond(&transport.Response{TypeURL: typeURL, Version: version, Nonce: "n-" + version, Resources: res})
}

func (h *harness) delta(typeURL string, removed []string, res ...*discoveryv3.Resource) error {
	h.t.Helper()
	return h.respond(&transport.Response{TypeURL: typeURL, Nonce: "dn", Delta: true, DeltaResources: res, Removed: removed})
}

// sent tells the client that names went out on a live stream.
func (h *harness) sent(typeURL string, names ...string) {
	h.transport().handler.OnSubscriptionsSent(typeURL, names)
}

// sync waits until every callback queued so far has run.
func (h *harness) sync() {
	h.t.Helper()
	done := make(chan struct{})
	h.c.cbs.schedule(func() { close(done) })
	select {
	case <-done:
	case <-time.After(testTimeout):
		h.t.Fatal("callbacks stuck")
	}
}

// event is one callback received by a recorder.
type event struct {
	kind  string // "update", "resource-error", "ambient-error"
	value *testValue
	err   error
}

func (e event) String() string {
	if e.kind == "update" {
		return fmt.Sprintf("update(%s=%s)", e.value.name, e.value.payload)
	}
	return fmt.Sprintf("%s(%v)", e.kind, e.err)
}

// recorder is a Watcher that queues what it is told.
type recorder struct {
	events chan event
}

func newRecorder() *recorder { return &recorder{events: make(chan event, 10000)} }

func (r *recorder) Update(v *testValue)     { r.events <- event{kind: "update", value: v} }
func (r *recorder) ResourceError(err error) { r.events <- event{kind: "resource-error", err: err} }
func (r *recorder) AmbientError(err error)  { r.events <- event{kind: "ambient-error", err: err} }

func (r *recorder) next(t *testing.T) event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	select {
	case e := <-r.events:
		return e
	case <-ctx.Done():
		t.Fatal("no event")
	}
	return event{}
}

// none asserts nothing is queued. Call it after harness.sync or respond,
// which guarantee every earlier callback has run.
func (r *recorder) none(t *testing.T) {
	t.Helper()
	select {
	case e := <-r.events:
		t.Fatalf("unexpected event %v", e)
	default:
	}
}

func (r *recorder) wantUpdate(t *testing.T, name, payload string) {
	t.Helper()
	e := r.next(t)
	if e.kind != "update" || e.value.name != name || e.value.payload != payload {
		t.Fatalf("got %v, want update(%s=%s)", e, name, payload)
	}
}

func (r *recorder) wantError(t *testing.T, kind string, target error) *Error {
	t.Helper()
	e := r.next(t)
	if e.kind != kind || !errors.Is(e.err, target) {
		t.Fatalf("got %v, want %s(%v)", e, kind, target)
	}
	var xe *Error
	if !errors.As(e.err, &xe) {
		t.Fatalf("error %v is not an *Error", e.err)
	}
	return xe
}
