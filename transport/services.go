package transport

import (
	"context"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimeservice "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
)

// The type URLs that have services of their own. The transport knows types
// by URL only.
const (
	listenerType    = "type.googleapis.com/envoy.config.listener.v3.Listener"
	routeType       = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	scopedRouteType = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration"
	virtualHostType = "type.googleapis.com/envoy.config.route.v3.VirtualHost"
	clusterType     = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	endpointType    = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	secretType      = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	runtimeType     = "type.googleapis.com/envoy.service.runtime.v3.Runtime"
)

type (
	sotwClientStream  = grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	deltaClientStream = grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
	sotwOpener        = func(ctx context.Context) (sotwClientStream, error)
	deltaOpener       = func(ctx context.Context) (deltaClientStream, error)
)

// perTypeService returns how to open the per-type stream of typeURL (the
// "basic" xDS variant: one service per type), SotW or delta. ok is false
// for a type with no such service, or with no such variant of it (VHDS is
// delta only).
func perTypeService(cc grpc.ClientConnInterface, typeURL string) (sotw sotwOpener, delta deltaOpener, ok bool) {
	opts := []grpc.CallOption(nil)
	switch typeURL {
	case listenerType:
		c := listenerservice.NewListenerDiscoveryServiceClient(cc)
		return func(ctx context.Context) (sotwClientStream, error) { return c.StreamListeners(ctx, opts...) },
			func(ctx context.Context) (deltaClientStream, error) { return c.DeltaListeners(ctx, opts...) }, true
	case routeType:
		c := routeservice.NewRouteDiscoveryServiceClient(cc)
		return func(ctx context.Context) (sotwClientStream, error) { return c.StreamRoutes(ctx, opts...) },
			func(ctx context.Context) (deltaClientStream, error) { return c.DeltaRoutes(ctx, opts...) }, true
	case scopedRouteType:
		c := routeservice.NewScopedRoutesDiscoveryServiceClient(cc)
		return func(ctx context.Context) (sotwClientStream, error) { return c.StreamScopedRoutes(ctx, opts...) },
			func(ctx context.Context) (deltaClientStream, error) { return c.DeltaScopedRoutes(ctx, opts...) }, true
	case virtualHostType:
		c := routeservice.NewVirtualHostDiscoveryServiceClient(cc)
		return nil, func(ctx context.Context) (deltaClientStream, error) { return c.DeltaVirtualHosts(ctx, opts...) }, true
	case clusterType:
		c := clusterservice.NewClusterDiscoveryServiceClient(cc)
		return func(ctx context.Context) (sotwClientStream, error) { return c.StreamClusters(ctx, opts...) },
			func(ctx context.Context) (deltaClientStream, error) { return c.DeltaClusters(ctx, opts...) }, true
	case endpointType:
		c := endpointservice.NewEndpointDiscoveryServiceClient(cc)
		return func(ctx context.Context) (sotwClientStream, error) { return c.StreamEndpoints(ctx, opts...) },
			func(ctx context.Context) (deltaClientStream, error) { return c.DeltaEndpoints(ctx, opts...) }, true
	case secretType:
		c := secretservice.NewSecretDiscoveryServiceClient(cc)
		return func(ctx context.Context) (sotwClientStream, error) { return c.StreamSecrets(ctx, opts...) },
			func(ctx context.Context) (deltaClientStream, error) { return c.DeltaSecrets(ctx, opts...) }, true
	case runtimeType:
		c := runtimeservice.NewRuntimeDiscoveryServiceClient(cc)
		return func(ctx context.Context) (sotwClientStream, error) { return c.StreamRuntime(ctx, opts...) },
			func(ctx context.Context) (deltaClientStream, error) { return c.DeltaRuntime(ctx, opts...) }, true
	}
	return nil, nil, false
}

// restPaths are the REST-JSON endpoints of the types that have one, after
// the server's base URL.
var restPaths = map[string]string{
	listenerType:    "/v3/discovery:listeners",
	routeType:       "/v3/discovery:routes",
	scopedRouteType: "/v3/discovery:scoped-routes",
	clusterType:     "/v3/discovery:clusters",
	endpointType:    "/v3/discovery:endpoints",
	secretType:      "/v3/discovery:secrets",
	runtimeType:     "/v3/discovery:runtime",
}
