package testutils

import (
	"context"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait of a test; a passing test never comes close.
const testTimeout = 10 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// adsClient dials addr; the connection closes when the test ends.
func adsClient(t *testing.T, addr string) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient(%q): %v", addr, err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
}

// sotwStream is a hand-driven SotW ADS stream.
type sotwStream struct {
	t  *testing.T
	st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
}

func openSotW(ctx context.Context, t *testing.T, c discoveryv3.AggregatedDiscoveryServiceClient) *sotwStream {
	t.Helper()
	st, err := c.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatalf("StreamAggregatedResources: %v", err)
	}
	return &sotwStream{t, st}
}

func (s *sotwStream) send(req *discoveryv3.DiscoveryRequest) {
	s.t.Helper()
	if err := s.st.Send(req); err != nil {
		s.t.Fatalf("Send(%v): %v", req, err)
	}
}

func (s *sotwStream) recv() *discoveryv3.DiscoveryResponse {
	s.t.Helper()
	resp, err := s.st.Recv()
	if err != nil {
		s.t.Fatalf("Recv: %v", err)
	}
	return resp
}

// ack acknowledges resp, keeping names as the subscription.
func (s *sotwStream) ack(resp *discoveryv3.DiscoveryResponse, names ...string) {
	s.t.Helper()
	s.send(&discoveryv3.DiscoveryRequest{
		TypeUrl:       resp.GetTypeUrl(),
		VersionInfo:   resp.GetVersionInfo(),
		ResponseNonce: resp.GetNonce(),
		ResourceNames: names,
	})
}

// deltaStream is a hand-driven delta ADS stream.
type deltaStream struct {
	t  *testing.T
	st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
}

func openDelta(ctx context.Context, t *testing.T, c discoveryv3.AggregatedDiscoveryServiceClient) *deltaStream {
	t.Helper()
	st, err := c.DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatalf("DeltaAggregatedResources: %v", err)
	}
	return &deltaStream{t, st}
}

func (s *deltaStream) send(req *discoveryv3.DeltaDiscoveryRequest) {
	s.t.Helper()
	if err := s.st.Send(req); err != nil {
		s.t.Fatalf("Send(%v): %v", req, err)
	}
}

func (s *deltaStream) recv() *discoveryv3.DeltaDiscoveryResponse {
	s.t.Helper()
	resp, err := s.st.Recv()
	if err != nil {
		s.t.Fatalf("Recv: %v", err)
	}
	return resp
}

func node(id string) *corev3.Node { return &corev3.Node{Id: id} }

// namesOf decodes the names of the resources of a SotW response, unwrapping
// discovery.v3.Resource wrappers.
func namesOf(t *testing.T, resp *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var names []string
	for _, a := range resp.GetResources() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatalf("decoding %s: %v", a.GetTypeUrl(), err)
		}
		if w, ok := m.(*discoveryv3.Resource); ok {
			names = append(names, w.GetName())
			continue
		}
		name, ok := resourceName(m)
		if !ok {
			t.Fatalf("resource %v has no name", m)
		}
		names = append(names, name)
	}
	return sorted(names)
}

func deltaNamesOf(resp *discoveryv3.DeltaDiscoveryResponse) []string {
	var names []string
	for _, r := range resp.GetResources() {
		names = append(names, r.GetName())
	}
	return sorted(names)
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// wrappedResources returns the discovery.v3.Resource wrappers of resp by name.
func wrappedResources(t *testing.T, resp *discoveryv3.DiscoveryResponse) map[string]*discoveryv3.Resource {
	t.Helper()
	out := make(map[string]*discoveryv3.Resource)
	for _, a := range resp.GetResources() {
		w := &discoveryv3.Resource{}
		if a.MessageIs(w) {
			if err := a.UnmarshalTo(w); err != nil {
				t.Fatalf("decoding a wrapper: %v", err)
			}
			out[w.GetName()] = w
		}
	}
	return out
}
