package xdsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"google.golang.org/grpc"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/internal/serverlds"
	"github.com/goxds/xds/internal/sharedclient"
)

// serverOption is an option of this package passed among grpc's: it
// embeds grpc.EmptyServerOption so that it is a grpc.ServerOption that grpc
// itself ignores.
type serverOption struct {
	grpc.EmptyServerOption
	apply func(*options)
}

type options struct {
	logger       *slog.Logger
	modeCallback ServingModeCallbackFunc
	bootstrap    *bootstrap.Config
	client       *client.Client
	clientOpts   client.Options
}

// ServingModeCallback returns an option that has cb told of every change
// of serving mode, as grpc-go's xds.ServingModeCallback. Without one, the
// server logs the changes instead (see Logger).
func ServingModeCallback(cb ServingModeCallbackFunc) grpc.ServerOption {
	return serverOption{apply: func(o *options) { o.modeCallback = cb }}
}

// BootstrapConfig returns an option that takes the management servers and
// server_listener_resource_name_template from cfg instead of from the
// environment (bootstrap.FromEnv), or with SharedClient from the client's
// bootstrap.
func BootstrapConfig(cfg *bootstrap.Config) grpc.ServerOption {
	return serverOption{apply: func(o *options) { o.bootstrap = cfg }}
}

// ClientOptions returns an option that tunes the xDS client the server
// creates; unused with SharedClient.
func ClientOptions(opts client.Options) grpc.ServerOption {
	return serverOption{apply: func(o *options) { o.clientOpts = opts }}
}

// Logger returns an option that sends the server's log lines to l: its
// warnings (a filter chain whose certificate providers cannot be built, a
// Listener update refused while serving goes on) and, without a
// ServingModeCallback, its serving-mode changes (not serving and why, at
// warning level). Default: client.DefaultLogger(), warnings to
// slog.Default().
func Logger(l *slog.Logger) grpc.ServerOption {
	return serverOption{apply: func(o *options) { o.logger = l }}
}

// SharedClient returns an option that makes the server watch through c
// instead of a client of its own. c is not closed by the server. The
// Listener name template and the certificate providers come from c's
// bootstrap ((*client.Client).Bootstrap), unless BootstrapConfig gives
// another, as with grpcxds.Options{Client: c}.
func SharedClient(c *client.Client) grpc.ServerOption {
	return serverOption{apply: func(o *options) { o.client = c }}
}

// GRPCServer is a gRPC server configured by xDS (gRFC A36): each address
// it serves on watches its Listener, serves only while that Listener is
// good, matches every connection to a filter chain, and routes and
// authorizes (RBAC, gRFC A41) every RPC by the chain's configuration.
//
// Register services before calling Serve, as with a grpc.Server.
type GRPCServer struct {
	// Read-only after NewGRPCServer.
	opts     options
	grpcOpts []grpc.ServerOption // the caller's, without this package's
	xc       *client.Client
	ownsXC   bool
	// info holds the registered services for GetServiceInfo; it never
	// serves.
	info *grpc.Server

	// logger is Logger's, or client.DefaultLogger().
	logger *slog.Logger

	// reports tells the serving-mode changes of every address.
	reports *serverlds.Reporter

	// mu guards services, registered before Serve.
	mu       sync.Mutex
	services []service

	// listeners are the addresses served, for Stop.
	listeners serverlds.Set[*generation]

	// wg counts the goroutines of generations (serving and draining).
	wg sync.WaitGroup

	// authzChannels are the channels to external authorization and
	// processing services (gRFC A92 and A93, xdsserver/extauthz.go and
	// extproc.go), closed by Stop.
	authzChannels extauthzgrpc.Channels

	// procOwner is the life of the server's external processing streams
	// (gRFC A93): Stop ends it, and with it every stream, those an
	// observability-mode filter keeps open after their RPC included.
	procOwner context.Context
	stopProcs context.CancelFunc
}

type service struct {
	desc *grpc.ServiceDesc
	impl any
}

// NewGRPCServer returns an xDS-enabled gRPC server. opts are grpc's server
// options and this package's (ServingModeCallback, BootstrapConfig,
// ClientOptions, SharedClient). It fails when the bootstrap cannot be read
// or has no server_listener_resource_name_template.
//
// The caller's grpc.Creds secure the connections, as grpc-go's: the
// Listeners' DownstreamTlsContexts are used only with xDS server
// credentials (xdscreds.NewServerCredentials, package grpcxds/xdscreds);
// with any others they are ignored, and without grpc.Creds the server is
// plaintext.
//
// The server installs a unary and a stream interceptor (with
// grpc.ChainUnaryInterceptor and grpc.ChainStreamInterceptor, ahead of the
// caller's chained ones) that route and authorize each RPC.
func NewGRPCServer(opts ...grpc.ServerOption) (*GRPCServer, error) {
	s := &GRPCServer{}
	s.reports = serverlds.NewReporter(s.tell)
	for _, o := range opts {
		if so, ok := o.(serverOption); ok {
			so.apply(&s.opts)
			continue
		}
		s.grpcOpts = append(s.grpcOpts, o)
	}
	s.logger = s.opts.logger
	if s.logger == nil {
		// As the client's: warnings to slog.Default(), as it is when the
		// line is written.
		s.logger = client.DefaultLogger()
	}
	cfg, err := sharedclient.Bootstrap(s.opts.bootstrap, s.opts.client)
	if err != nil {
		// gRPC's words first, for what was written against them.
		return nil, fmt.Errorf("xdsserver: failed to read xDS bootstrap config from env vars: %w", err)
	}
	s.opts.bootstrap = cfg
	if s.opts.bootstrap.ServerListenerResourceNameTemplate == "" {
		return nil, errors.New("xdsserver: missing server_listener_resource_name_template in the bootstrap configuration")
	}
	s.xc = s.opts.client
	if s.xc == nil {
		xc, err := client.New(s.opts.bootstrap, s.opts.clientOpts)
		if err != nil {
			return nil, fmt.Errorf("xdsserver: xDS client creation failed: %w", err)
		}
		s.xc, s.ownsXC = xc, true
	}
	s.info = grpc.NewServer()
	s.procOwner, s.stopProcs = context.WithCancel(context.Background())
	return s, nil
}

// RegisterService registers a service and its implementation, as
// grpc.Server.RegisterService does. Call it before Serve.
func (s *GRPCServer) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s.mu.Lock()
	s.services = append(s.services, service{desc, impl})
	s.mu.Unlock()
	s.info.RegisterService(desc, impl)
}

// GetServiceInfo returns the registered services, as
// grpc.Server.GetServiceInfo does.
func (s *GRPCServer) GetServiceInfo() map[string]grpc.ServiceInfo { return s.info.GetServiceInfo() }

// Serve serves on lis, configured by the Listener the bootstrap's template
// names for lis.Addr(). It blocks until lis fails or the server stops, and
// then closes lis. After Stop or GracefulStop it returns nil.
func (s *GRPCServer) Serve(lis net.Listener) error {
	name, _ := s.opts.bootstrap.ServerListenerResourceName(lis.Addr().String())
	err := s.listeners.Serve(newListener(s, lis, name).core)
	if err == serverlds.ErrStopped {
		return grpc.ErrServerStopped
	}
	return err
}

// Stop closes every listener and connection at once, and the xDS client
// if the server created it. It returns when every goroutine of the server
// has ended, but for one still in a certificate provider plugin's Build:
// Stop does not wait for a plugin, and that goroutine ends when the plugin
// returns, closing what it built. (grpc-go's certprovider store holds one
// process-wide lock while a plugin builds, and closing a provider takes it
// too: a Stop that closes the providers of a generation serving TLS still
// waits for such a Build to return.)
func (s *GRPCServer) Stop() { s.stop(false) }

// GracefulStop closes every listener, lets the RPCs in progress finish,
// then does what Stop does.
func (s *GRPCServer) GracefulStop() { s.stop(true) }

func (s *GRPCServer) stop(graceful bool) {
	ls, already := s.listeners.Stop()
	for _, l := range ls {
		l.Close(graceful)
	}
	if !graceful {
		// Generations still draining from earlier Listener changes.
		for _, l := range ls {
			l.CloseAll()
		}
	}
	s.wg.Wait()
	if !already {
		s.stopProcs()
		s.authzChannels.Close()
		s.info.Stop()
		if s.ownsXC {
			s.xc.Close()
		}
	}
}

// newGRPCServer builds the grpc.Server of one generation: the caller's
// options, this package's interceptors for that generation, and every
// registered service.
func (s *GRPCServer) newGRPCServer(g *generation) *grpc.Server {
	opts := append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(g.unary),
		grpc.ChainStreamInterceptor(g.stream),
	}, s.grpcOpts...)
	// The caller's grpc.Creds, if any, secure the connections, as in
	// grpc-go: only xDS server credentials (xdscreds.NewServerCredentials)
	// ask a connection for its filter chain's TLS (xdsconn.FilterChainConn);
	// others ignore it, and without grpc.Creds connections are plaintext.
	srv := grpc.NewServer(opts...)
	s.mu.Lock()
	svcs := s.services
	s.mu.Unlock()
	for _, sv := range svcs {
		srv.RegisterService(sv.desc, sv.impl)
	}
	return srv
}
