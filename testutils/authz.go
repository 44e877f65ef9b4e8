package testutils

import (
	"context"
	"net"
	"sync"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
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
// (an error fails the call with it). Stop it when done.
func StartAuthzServer(handler func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error)) (*AuthzServer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &AuthzServer{lis: lis, srv: grpc.NewServer(), handler: handler}
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
