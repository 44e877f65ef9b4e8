package transport_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc/backoff"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	ldsURL = "type.googleapis.com/envoy.config.listener.v3.Listener"
	rdsURL = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	cdsURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	edsURL = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

var testNode = &corev3.Node{Id: "node-1", ClientFeatures: []string{"xds.config.supports-resource-ttl"}}

// fastOptions keep reconnection quick in tests.
var fastOptions = transport.Options{
	Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 50 * time.Millisecond},
	MinStreamInterval: time.Millisecond,
}

// handler is a transport.Handler that records what it is told and judges
// responses with verdict.
type handler struct {
	responses  chan *transport.Response
	sent       chan sentNames
	streamErrs chan error
	unservable chan unservable

	mu       sync.Mutex
	verdict  func(*transport.Response) error // nil: ACK everything
	hold     chan func()                     // non-nil: done funcs are handed here instead of called
	versions map[string]map[string]string    // what ResourceVersions returns
	askedFor []string                        // type URLs ResourceVersions was asked about
}

// unservable is one call of OnUnservable.
type unservable struct {
	typeURL string
	names   []string
	err     error
}

type sentNames struct {
	typeURL string
	names   []string
}

func newHandler() *handler {
	return &handler{
		responses:  make(chan *transport.Response, 100),
		sent:       make(chan sentNames, 100),
		streamErrs: make(chan error, 100),
		unservable: make(chan unservable, 100),
	}
}

func (h *handler) OnResponse(r *transport.Response, done func()) error {
	h.mu.Lock()
	verdict, hold := h.verdict, h.hold
	h.mu.Unlock()
	h.responses <- r
	if hold != nil {
		hold <- done
	} else {
		done()
	}
	if verdict != nil {
		return verdict(r)
	}
	return nil
}

func (h *handler) OnSubscriptionsSent(typeURL string, names []string) {
	h.sent <- sentNames{typeURL, names}
}

func (h *handler) OnStreamError(err *transport.StreamError) { h.streamErrs <- err }

func (h *handler) OnUnservable(typeURL string, names []string, err error) {
	h.unservable <- unservable{typeURL, names, err}
}

func (h *handler) nextUnservable(t *testing.T) unservable {
	t.Helper()
	select {
	case u := <-h.unservable:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("nothing reported unservable")
	}
	return unservable{}
}

func (h *handler) ResourceVersions(typeURL string) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.askedFor = append(h.askedFor, typeURL)
	return h.versions[typeURL]
}

func (h *handler) setVerdict(f func(*transport.Response) error) {
	h.mu.Lock()
	h.verdict = f
	h.mu.Unlock()
}

func (h *handler) nextResponse(t *testing.T) *transport.Response {
	t.Helper()
	select {
	case r := <-h.responses:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no response reached the handler")
	}
	return nil
}

func (h *handler) nextStreamErr(t *testing.T) error {
	t.Helper()
	select {
	case err := <-h.streamErrs:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no stream error reported")
	}
	return nil
}

// env is a fake server and a transport to it.
type env struct {
	t  *testing.T
	fs *testutils.FakeServer
	h  *handler
	tr transport.Transport
}

func newEnv(t *testing.T, apiType bootstrap.APIType, opts transport.Options, h *handler) *env {
	t.Helper()
	fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Stop)
	if h == nil {
		h = newHandler()
	}
	server := bootstrap.ServerConfig{
		ServerURI:    fs.Address(),
		ChannelCreds: []bootstrap.ChannelCreds{{Type: bootstrap.CredsInsecure}},
		APIType:      apiType,
	}
	tr, err := transport.NewBuilder(opts).Build(server, testNode, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return &env{t: t, fs: fs, h: h, tr: tr}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) next() *discoveryv3.DiscoveryRequest {
	e.t.Helper()
	r, err := e.fs.NextRequest(ctxT(e.t))
	if err != nil {
		e.t.Fatalf("waiting for a request: %v", err)
	}
	return r
}

func (e *env) nextDelta() *discoveryv3.DeltaDiscoveryRequest {
	e.t.Helper()
	r, err := e.fs.NextDeltaRequest(ctxT(e.t))
	if err != nil {
		e.t.Fatalf("waiting for a request: %v", err)
	}
	return r
}

// want compares a request with the exact one expected.
func want(t *testing.T, got, want proto.Message) {
	t.Helper()
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Fatalf("request differs (-want +got):\n%s", diff)
	}
}

var errRejected = errors.New("listener L1: route_config_name: must not be empty")

// The API types each wire test runs on: every SotW test on the aggregated
// stream and on one stream per type, every delta test likewise. The rules
// are the same; where the wire differs (the node starts every per-type
// stream; a stream that ends after answering is routine and not reported
// on per-type streams) the test says so.
var (
	sotwVariants  = []bootstrap.APIType{bootstrap.APITypeAggregatedGRPC, bootstrap.APITypeGRPC}
	deltaVariants = []bootstrap.APIType{bootstrap.APITypeAggregatedDeltaGRPC, bootstrap.APITypeDeltaGRPC}
)

// forEachAPIType runs f as a subtest per API type.
func forEachAPIType(t *testing.T, apis []bootstrap.APIType, f func(t *testing.T, api bootstrap.APIType)) {
	for _, api := range apis {
		t.Run(api.String(), func(t *testing.T) { f(t, api) })
	}
}

// perType tells the per-type variants from the aggregated ones.
func perType(api bootstrap.APIType) bool {
	return api == bootstrap.APITypeGRPC || api == bootstrap.APITypeDeltaGRPC
}

// nodeOfNewType is the node on the first request of a type once the stream
// has carried another type: none on ADS, where only the stream's first
// request has it; on per-type streams each type's first request starts its
// own stream.
func nodeOfNewType(api bootstrap.APIType) *corev3.Node {
	if perType(api) {
		return testNode
	}
	return nil
}
