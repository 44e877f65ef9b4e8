package testutils

import (
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimeservice "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
)

// The per-type services of a FakeServer: each RPC is a stream like an ADS
// one, recorded with the type its service serves.

type (
	sotwServerStream  = grpc.BidiStreamingServer[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	deltaServerStream = grpc.BidiStreamingServer[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
)

func registerPerTypeServices(gs *grpc.Server, s *FakeServer) {
	listenerservice.RegisterListenerDiscoveryServiceServer(gs, fakeLDS{s: s})
	routeservice.RegisterRouteDiscoveryServiceServer(gs, fakeRDS{s: s})
	routeservice.RegisterScopedRoutesDiscoveryServiceServer(gs, fakeSRDS{s: s})
	routeservice.RegisterVirtualHostDiscoveryServiceServer(gs, fakeVHDS{s: s})
	clusterservice.RegisterClusterDiscoveryServiceServer(gs, fakeCDS{s: s})
	endpointservice.RegisterEndpointDiscoveryServiceServer(gs, fakeEDS{s: s})
	secretservice.RegisterSecretDiscoveryServiceServer(gs, fakeSDS{s: s})
	runtimeservice.RegisterRuntimeDiscoveryServiceServer(gs, fakeRTDS{s: s})
}

// serveSotW serves one per-type SotW stream of typeURL.
func (s *FakeServer) serveSotW(typeURL string, gs sotwServerStream) error {
	st, err := s.openTyped(gs, false, typeURL)
	if err != nil {
		return err
	}
	return st.serve(s, func() (Request, error) {
		req, err := gs.Recv()
		return Request{SotW: req}, err
	})
}

// serveDelta serves one per-type delta stream of typeURL.
func (s *FakeServer) serveDelta(typeURL string, gs deltaServerStream) error {
	st, err := s.openTyped(gs, true, typeURL)
	if err != nil {
		return err
	}
	return st.serve(s, func() (Request, error) {
		req, err := gs.Recv()
		return Request{Delta: req}, err
	})
}

type fakeLDS struct {
	listenerservice.UnimplementedListenerDiscoveryServiceServer
	s *FakeServer
}

func (f fakeLDS) StreamListeners(gs sotwServerStream) error {
	return f.s.serveSotW(resourcev3.ListenerType, gs)
}
func (f fakeLDS) DeltaListeners(gs deltaServerStream) error {
	return f.s.serveDelta(resourcev3.ListenerType, gs)
}

type fakeRDS struct {
	routeservice.UnimplementedRouteDiscoveryServiceServer
	s *FakeServer
}

func (f fakeRDS) StreamRoutes(gs sotwServerStream) error {
	return f.s.serveSotW(resourcev3.RouteType, gs)
}
func (f fakeRDS) DeltaRoutes(gs deltaServerStream) error {
	return f.s.serveDelta(resourcev3.RouteType, gs)
}

type fakeSRDS struct {
	routeservice.UnimplementedScopedRoutesDiscoveryServiceServer
	s *FakeServer
}

func (f fakeSRDS) StreamScopedRoutes(gs sotwServerStream) error {
	return f.s.serveSotW(resourcev3.ScopedRouteType, gs)
}
func (f fakeSRDS) DeltaScopedRoutes(gs deltaServerStream) error {
	return f.s.serveDelta(resourcev3.ScopedRouteType, gs)
}

type fakeVHDS struct {
	routeservice.UnimplementedVirtualHostDiscoveryServiceServer
	s *FakeServer
}

func (f fakeVHDS) DeltaVirtualHosts(gs deltaServerStream) error {
	return f.s.serveDelta(resourcev3.VirtualHostType, gs)
}

type fakeCDS struct {
	clusterservice.UnimplementedClusterDiscoveryServiceServer
	s *FakeServer
}

func (f fakeCDS) StreamClusters(gs sotwServerStream) error {
	return f.s.serveSotW(resourcev3.ClusterType, gs)
}
func (f fakeCDS) DeltaClusters(gs deltaServerStream) error {
	return f.s.serveDelta(resourcev3.ClusterType, gs)
}

type fakeEDS struct {
	endpointservice.UnimplementedEndpointDiscoveryServiceServer
	s *FakeServer
}

func (f fakeEDS) StreamEndpoints(gs sotwServerStream) error {
	return f.s.serveSotW(resourcev3.EndpointType, gs)
}
func (f fakeEDS) DeltaEndpoints(gs deltaServerStream) error {
	return f.s.serveDelta(resourcev3.EndpointType, gs)
}

type fakeSDS struct {
	secretservice.UnimplementedSecretDiscoveryServiceServer
	s *FakeServer
}

func (f fakeSDS) StreamSecrets(gs sotwServerStream) error {
	return f.s.serveSotW(resourcev3.SecretType, gs)
}
func (f fakeSDS) DeltaSecrets(gs deltaServerStream) error {
	return f.s.serveDelta(resourcev3.SecretType, gs)
}

type fakeRTDS struct {
	runtimeservice.UnimplementedRuntimeDiscoveryServiceServer
	s *FakeServer
}

func (f fakeRTDS) StreamRuntime(gs sotwServerStream) error {
	return f.s.serveSotW(resourcev3.RuntimeType, gs)
}
func (f fakeRTDS) DeltaRuntime(gs deltaServerStream) error {
	return f.s.serveDelta(resourcev3.RuntimeType, gs)
}
