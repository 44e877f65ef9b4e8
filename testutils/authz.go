package testutils

import (
	"context"
	"net"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	insecurev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/insecure/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
)

// AuthzCheck is one check an AuthzServer received: the request, and the
// metadata the call carried (a GrpcService's initial_metadata, gRFC A102).
type AuthzCheck struct {
	Request  *authv3.CheckRequest
	Metadata metadata.MD
}

// AuthzServer is an external authorization service
// (envoy.service.auth.v3.Authorization, gRFC A92) on 127.0.0.1, answering
// each check with its handler and recording it.
type AuthzServer struct {
	authv3.UnimplementedAuthorizationServer
	lis     net.Listener
	srv     *grpc.Server
	handler func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error)

	mu     sync.Mutex
	checks []AuthzCheck
}

// StartAuthzServer starts an AuthzServer whose handler answers each check
// (an error fails the call with it), its gRPC server made with opts (its
// credentials, say: SideTLS.ServerOption). Stop it when done.
func StartAuthzServer(handler func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error), opts ...grpc.ServerOption) (*AuthzServer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &AuthzServer{lis: lis, srv: grpc.NewServer(opts...), handler: handler}
	authv3.RegisterAuthorizationServer(s.srv, s)
	go s.srv.Serve(lis)
	return s, nil
}

// Target is the server's gRPC target URI, for a GrpcService's target_uri
// and an allowed_grpc_services key.
func (s *AuthzServer) Target() string { return "passthrough:///" + s.lis.Addr().String() }

// Check implements envoy.service.auth.v3.Authorization.
func (s *AuthzServer) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	s.checks = append(s.checks, AuthzCheck{Request: req, Metadata: md})
	s.mu.Unlock()
	return s.handler(ctx, req)
}

// Checks returns the checks received so far, oldest first.
func (s *AuthzServer) Checks() []AuthzCheck {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AuthzCheck(nil), s.checks...)
}

// Stop stops the server at once; checks in progress fail.
func (s *AuthzServer) Stop() { s.srv.Stop() }

// ExtAuthzFilter is an HTTP filter named "authz" of the external
// authorization filter (gRFC A92) calling target through a GrpcService with
// insecure channel credentials and the initial metadata x-tenant: blue
// (which only a trusted_xds_server's configuration gets used, gRFC A102),
// changed by change when it is not nil.
func ExtAuthzFilter(target string, change func(*extauthzv3.ExtAuthz)) *hcmv3.HttpFilter {
	m := &extauthzv3.ExtAuthz{Services: &extauthzv3.ExtAuthz_GrpcService{GrpcService: &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{
			TargetUri:                target,
			ChannelCredentialsPlugin: []*anypb.Any{MarshalAny(&insecurev3.InsecureCredentials{})},
		}},
		InitialMetadata: []*corev3.HeaderValue{{Key: "x-tenant", Value: "blue"}},
	}}}
	if change != nil {
		change(m)
	}
	return &hcmv3.HttpFilter{Name: "authz", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: MarshalAny(m)}}
}

// AllowGRPCService is a bootstrap edit listing target in
// allowed_grpc_services with insecure channel credentials (gRFC A102), so
// that an untrusted management server may name it.
func AllowGRPCService(target string) func(*bootstrap.Config) {
	return func(c *bootstrap.Config) {
		c.AllowedGRPCServices = map[string]bootstrap.AllowedGRPCService{
			target: {ChannelCreds: []bootstrap.ChannelCreds{{Type: bootstrap.CredsInsecure}}},
		}
	}
}
