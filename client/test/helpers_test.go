// Package test holds the client's black-box suites: protocol tests that
// drive the real client (client.New, the built-in resource types, the gRPC
// transport) against testutils.FakeServer and assert the exact requests on
// the wire, and end-to-end tests against go-control-plane's server
// (testutils.ManagementServer), run alike over SotW and delta.
//
// Tests never sleep. They wait, with a deadline, for an event: a request on
// the wire, a watcher callback, a server hook. A test that checks that
// nothing happened first waits for an event proving the client is past the
// point where it would have happened (see barrier).
package test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// Every test must leave no goroutine behind: Close stops them all.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	nodeID = "node-1"
	// timeout bounds every wait; a test that hits it has failed.
	timeout = 10 * time.Second
	// noExpiry is a does-not-exist timeout no test waits for, so that the
	// timer never interferes with a test about something else.
	noExpiry = time.Hour
)

// Type URLs, short.
const (
	ldsURL = resources.ListenerTypeURL
	rdsURL = resources.RouteConfigTypeURL
	cdsURL = resources.ClusterTypeURL
	edsURL = resources.EndpointsTypeURL
)

// fastTransport makes reconnection quick: a lost stream is back within a few
// milliseconds, and gRPC redials a lost connection as fast.
var fastTransport = transport.Options{
	Backoff:           fastBackoff,
	MinStreamInterval: time.Millisecond,
	DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           fastBackoff,
		MinConnectTimeout: time.Second,
	})},
}

var fastBackoff = backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 50 * time.Millisecond}

// clientFeatures are the client features the node must advertise
// (PROTOCOL.md, "Node identification and client features").
var clientFeatures = []string{
	"xds.config.supports-resource-ttl",
	"xds.config.supports-resource-in-sotw",
	"xds.config.resource-in-sotw",
}

// wantNode is the node the first request of every stream must carry.
var wantNode = bootstrap.Node{ID: nodeID}.Proto(clientFeatures)

// protocol is one variant of the xDS protocol, for suites that run on
// several.
type protocol struct {
	name    string
	apiType string // for testutils.BootstrapJSON
	delta   bool
	// perType: one stream per type (the "basic" variants) instead of ADS.
	// Each type's first request starts its own stream, with the node.
	perType bool
	// rest: REST-JSON polling; the server is a testutils.RESTServer.
	rest bool
	// files: a FILESYSTEM server; the server writes files.
	files bool
}

var (
	sotw      = protocol{name: "sotw", apiType: testutils.APITypeSotW}
	delta     = protocol{name: "delta", apiType: testutils.APITypeDelta, delta: true}
	protocols = []protocol{sotw, delta} // the ADS variants

	sotwPerType  = protocol{name: "sotw-per-type", apiType: testutils.APITypeSotWPerType, perType: true}
	deltaPerType = protocol{name: "delta-per-type", apiType: testutils.APITypeDeltaPerType, delta: true, perType: true}
	// everyProtocol is every gRPC variant: the suites over FakeServer run on
	// each.
	everyProtocol  = []protocol{sotw, delta, sotwPerType, deltaPerType}
	sotwProtocols  = []protocol{sotw, sotwPerType}
	deltaProtocols = []protocol{delta, deltaPerType}

	rest  = protocol{name: "rest", apiType: testutils.APITypeREST, rest: true}
	files = protocol{name: "files", apiType: testutils.APITypeFilesystem, files: true}
)

// forEachProtocol runs f as a parallel subtest per protocol of ps. f calls
// t.Parallel itself.
func forEachProtocol(t *testing.T, ps []protocol, f func(t *testing.T, p protocol)) {
	t.Parallel()
	for _, p := range ps {
		t.Run(p.name, func(t *testing.T) { f(t, p) })
	}
}

// nodeOfNewType is the node on the first request of a type once the
// client has sent another: none over ADS, where only a stream's first
// request has it; on per-type streams, each type's first request starts a
// stream of its own.
func (p protocol) nodeOfNewType() *corev3.Node {
	if p.perType {
		return wantNode
	}
	return nil
}

// config is what newClient needs beyond the server address.
type config struct {
	expiry   time.Duration // WatchExpiry; 0 means noExpiry
	features []string      // server_features of the server
	// authorities maps authority names to the address of their server,
	// which speaks the same protocol.
	authorities map[string]string
	// clock, if set, runs the client's timers.
	clock *testutils.FakeClock
	// logger, if set, replaces testLogger().
	logger *slog.Logger
	// certProviders are the bootstrap's certificate_providers.
	certProviders map[string]bootstrap.CertificateProvider
	// registry, if set, is the client's Options.Registry.
	registry *resources.Registry
	// endpointFallback turns gRFC A95 on (bootstrap.Config.EndpointFallback,
	// as GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK=true would).
	endpointFallback bool
}

// newClient returns a client of the server at addr, speaking p, built from
// bootstrap JSON as a user's would be. It is closed when the test ends.
func newClient(t *testing.T, addr string, p protocol, cfg config) *client.Client {
	t.Helper()
	b, err := bootstrapFor(addr, p, cfg)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	expiry := cfg.expiry
	if expiry == 0 {
		expiry = noExpiry
	}
	opts := client.Options{WatchExpiry: expiry, TransportOptions: fastTransport, Logger: testLogger()}
	if cfg.clock != nil {
		opts.Clock = cfg.clock
	}
	if cfg.logger != nil {
		opts.Logger = cfg.logger
	}
	opts.Registry = cfg.registry
	c, err := client.New(b, opts)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// bootstrapFor parses the bootstrap JSON of a client of the server at addr.
func bootstrapFor(addr string, p protocol, cfg config) (*bootstrap.Config, error) {
	opts := testutils.BootstrapOptions{
		ServerURI:      addr,
		APIType:        p.apiType,
		ServerFeatures: cfg.features,
		NodeID:         nodeID,
	}
	switch {
	case p.rest:
		opts.ServerURI = "http://" + addr
	case p.files:
		opts.ResourceFiles = fileNames // addr is the directory
		opts.RefreshDelay = 20 * time.Millisecond
	}
	for name, addr := range cfg.authorities {
		if opts.Authorities == nil {
			opts.Authorities = make(map[string]testutils.BootstrapAuthority)
		}
		opts.Authorities[name] = testutils.BootstrapAuthority{
			Servers: []testutils.BootstrapServer{{URI: addr, APIType: p.apiType}},
		}
	}
	b, err := bootstrap.Parse(testutils.BootstrapJSON(opts))
	if err == nil {
		b.EndpointFallback = cfg.endpointFallback
	}
	if err == nil && cfg.certProviders != nil {
		b.CertificateProviders = cfg.certProviders
		err = b.Validate()
	}
	return b, err
}

// testLogger logs the client to stderr when XDS_TEST_LOG is set, for
// debugging a failing test; otherwise nothing (not nil: a client given no
// logger prints its warnings, and tests cause many on purpose).
func testLogger() *slog.Logger {
	if os.Getenv("XDS_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// barrier waits until every watcher callback the client has queued so far
// has run. Callbacks run in order on one goroutine, and a watch of a type
// the client does not know is answered through the same queue at once.
//
// It proves nothing about a response the client has not finished applying:
// call it once the reply (ACK or NACK) to that response is seen on the
// wire, since the client gives its verdict only after queueing the
// response's notifications.
func barrier(t *testing.T, c *client.Client) {
	t.Helper()
	done := make(chan struct{})
	c.WatchResource("type.googleapis.com/goxds.test.Barrier", "barrier", client.WatcherFuncs[resources.Resource]{
		OnResourceError: func(error) { close(done) },
	})
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatal("watcher callbacks are stuck")
	}
}

// event is one callback a recorder received.
type event[T resources.Resource] struct {
	kind  string // "update", "resource-error" or "ambient-error"
	value T
	err   error
	at    time.Time
}

func (e event[T]) String() string {
	if e.kind == "update" {
		return fmt.Sprintf("update(%s)", e.value.ResourceName())
	}
	return fmt.Sprintf("%s(%v)", e.kind, e.err)
}

// recorder is a Watcher that queues every callback.
type recorder[T resources.Resource] struct {
	events chan event[T]
}

func newRecorder[T resources.Resource]() *recorder[T] {
	return &recorder[T]{events: make(chan event[T], 1000)}
}

func (r *recorder[T]) Update(v T) {
	r.events <- event[T]{kind: "update", value: v, at: time.Now()}
}

func (r *recorder[T]) ResourceError(err error) {
	r.events <- event[T]{kind: "resource-error", err: err, at: time.Now()}
}

func (r *recorder[T]) AmbientError(err error) {
	r.events <- event[T]{kind: "ambient-error", err: err, at: time.Now()}
}

func (r *recorder[T]) next(t *testing.T) event[T] {
	t.Helper()
	select {
	case e := <-r.events:
		return e
	case <-time.After(timeout):
		t.Fatal("no watcher event")
	}
	return event[T]{}
}

// nextPastOutage is next, skipping reports that the server is unavailable:
// a test that restarts a server may or may not see one, depending on
// whether the client tried to reconnect before the new server was up.
func (r *recorder[T]) nextPastOutage(t *testing.T) event[T] {
	t.Helper()
	for {
		e := r.next(t)
		if e.kind == "update" || !errors.Is(e.err, client.ErrServerUnavailable) {
			return e
		}
	}
}

// wantUpdate waits for the next event and checks it delivers name.
func (r *recorder[T]) wantUpdate(t *testing.T, name string) T {
	t.Helper()
	return r.checkUpdate(t, r.next(t), name)
}

// wantUpdatePastOutage is wantUpdate after a server restart.
func (r *recorder[T]) wantUpdatePastOutage(t *testing.T, name string) T {
	t.Helper()
	return r.checkUpdate(t, r.nextPastOutage(t), name)
}

func (r *recorder[T]) checkUpdate(t *testing.T, e event[T], name string) T {
	t.Helper()
	if e.kind != "update" || e.value.ResourceName() != name {
		t.Fatalf("got %v, want update(%s)", e, name)
	}
	return e.value
}

// wantError waits for the next event and checks it is an error of kind
// wrapping target, for the resource name.
func (r *recorder[T]) wantError(t *testing.T, kind string, target error, name string) event[T] {
	t.Helper()
	e := r.next(t)
	if e.kind != kind || !errors.Is(e.err, target) {
		t.Fatalf("got %v, want %s(%v)", e, kind, target)
	}
	var xe *client.Error
	if !errors.As(e.err, &xe) || xe.Name != name {
		t.Fatalf("error %v does not name %q", e.err, name)
	}
	return e
}

func (r *recorder[T]) wantNotFound(t *testing.T, name string) event[T] {
	t.Helper()
	return r.wantError(t, "resource-error", client.ErrResourceNotFound, name)
}

// none checks that no event is queued. Call it after barrier.
func (r *recorder[T]) none(t *testing.T) {
	t.Helper()
	select {
	case e := <-r.events:
		t.Fatalf("unexpected watcher event %v", e)
	default:
	}
}

// nonePastOutage is none, but for reports that the server is unavailable.
func (r *recorder[T]) nonePastOutage(t *testing.T) {
	t.Helper()
	for {
		select {
		case e := <-r.events:
			if e.kind == "update" || !errors.Is(e.err, client.ErrServerUnavailable) {
				t.Fatalf("unexpected watcher event %v", e)
			}
		default:
			return
		}
	}
}

// fakeEnv is a client talking to a scriptable fake server.
type fakeEnv struct {
	t  *testing.T
	fs *testutils.FakeServer
	c  *client.Client
}

func newFakeEnv(t *testing.T, p protocol, cfg config) *fakeEnv {
	t.Helper()
	fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Stop)
	c := newClient(t, fs.Address(), p, cfg) // closed before fs stops
	return &fakeEnv{t: t, fs: fs, c: c}
}

// req waits for the next SotW request.
func (e *fakeEnv) req() *discoveryv3.DiscoveryRequest {
	e.t.Helper()
	r, err := e.fs.NextRequest(testContext(e.t))
	if err != nil {
		e.t.Fatalf("waiting for a request: %v", err)
	}
	return r
}

// deltaReq waits for the next delta request.
func (e *fakeEnv) deltaReq() *discoveryv3.DeltaDiscoveryRequest {
	e.t.Helper()
	r, err := e.fs.NextDeltaRequest(testContext(e.t))
	if err != nil {
		e.t.Fatalf("waiting for a delta request: %v", err)
	}
	return r
}

func (e *fakeEnv) send(resp *discoveryv3.DiscoveryResponse) {
	e.t.Helper()
	if err := e.fs.Send(resp); err != nil {
		e.t.Fatal(err)
	}
}

func (e *fakeEnv) sendDelta(resp *discoveryv3.DeltaDiscoveryResponse) {
	e.t.Helper()
	if err := e.fs.SendDelta(resp); err != nil {
		e.t.Fatal(err)
	}
}

// nextStream waits for the next stream the client opens.
func (e *fakeEnv) nextStream() *testutils.FakeStream {
	e.t.Helper()
	return nextStreamOf(e.t, e.fs)
}

// requestReader reads requests: those of every stream (a FakeServer) or of
// one (a FakeStream).
type requestReader interface {
	NextRequest(ctx context.Context) (*discoveryv3.DiscoveryRequest, error)
	NextDeltaRequest(ctx context.Context) (*discoveryv3.DeltaDiscoveryRequest, error)
}

// wantReq checks that got is exactly want.
func wantReq(t *testing.T, got, want proto.Message) {
	t.Helper()
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Fatalf("request differs (-want +got):\n%s", diff)
	}
}

// wantNACK checks that got is want plus an error_detail, with a code other
// than OK, whose message holds every one of mentions: a NACK must say what
// was wrong.
func wantNACK(t *testing.T, got, want proto.Message, mentions ...string) {
	t.Helper()
	stripped := proto.Clone(got)
	var detail *statuspb.Status
	switch s := stripped.(type) {
	case *discoveryv3.DiscoveryRequest:
		detail, s.ErrorDetail = s.ErrorDetail, nil
	case *discoveryv3.DeltaDiscoveryRequest:
		detail, s.ErrorDetail = s.ErrorDetail, nil
	default:
		t.Fatalf("wantNACK of a %T", got)
	}
	if detail == nil {
		t.Fatalf("request %v has no error_detail, want a NACK", got)
	}
	if codes.Code(detail.GetCode()) == codes.OK {
		t.Errorf("NACK error_detail has code OK")
	}
	for _, m := range mentions {
		if !strings.Contains(detail.GetMessage(), m) {
			t.Errorf("NACK error_detail %q does not mention %q", detail.GetMessage(), m)
		}
	}
	wantReq(t, stripped, want)
}

// reply waits for the next request of p's kind: an ACK or NACK, or a
// subscription change.
func (e *fakeEnv) reply(p protocol) {
	e.t.Helper()
	if p.delta {
		e.deltaReq()
	} else {
		e.req()
	}
}

// reqsNaming reads SotW requests until, for every type in want, the latest
// request of that type names exactly want's names (sorted), and returns
// those requests. Watches made one after another may reach the wire in one
// request or in several, as the client's flushes fall; a test that needs
// them all on the wire waits for the request holding all of them.
func (e *fakeEnv) reqsNaming(want map[string][]string) map[string]*discoveryv3.DiscoveryRequest {
	e.t.Helper()
	got := make(map[string]*discoveryv3.DiscoveryRequest)
	for done := false; !done; {
		r := e.req()
		got[r.GetTypeUrl()] = r
		done = true
		for typeURL, names := range want {
			if got[typeURL] == nil || !slices.Equal(got[typeURL].GetResourceNames(), names) {
				done = false
			}
		}
	}
	return got
}

// respond sends rs as one response of typeURL in p's form: a delta
// response, or a SotW response (version "v"+nonce) of wrapped resources.
func (e *fakeEnv) respond(p protocol, typeURL, nonce string, rs ...*discoveryv3.Resource) {
	e.t.Helper()
	if p.delta {
		e.sendDelta(testutils.DeltaResponse(typeURL, nonce, nil, rs...))
		return
	}
	resp := &discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: "v" + nonce, Nonce: nonce}
	for _, r := range rs {
		resp.Resources = append(resp.Resources, testutils.MarshalAny(r))
	}
	e.send(resp)
}

// sotwResp is a SotW response of typeURL at version with nonce "n"+version.
func sotwResp(typeURL, version string, msgs ...proto.Message) *discoveryv3.DiscoveryResponse {
	return testutils.SotWResponse(typeURL, version, "n"+version, msgs...)
}

// res wraps msg as a delta resource at version.
func res(name, version string, msg proto.Message) *discoveryv3.Resource {
	return testutils.WrapResource(name, version, 0, msg)
}

// status returns what the client's dump says of one resource.
func status(c *client.Client, typeURL, name string) (client.ResourceStatus, bool) {
	for _, st := range c.Dump() {
		if st.TypeURL == typeURL && st.Name == name {
			return st, true
		}
	}
	return client.ResourceStatus{}, false
}
