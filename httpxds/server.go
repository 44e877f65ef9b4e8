package httpxds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/internal/serverlds"
	"github.com/goxds/xds/internal/sharedclient"
	"github.com/goxds/xds/resources"
)

// Options configure a Server. The zero value reads the bootstrap from the
// environment (bootstrap.FromEnv) and makes a client of its own.
type Options struct {
	// Bootstrap names the management servers and the
	// server_listener_resource_name_template; nil: Client's, else
	// bootstrap.FromEnv().
	Bootstrap *bootstrap.Config
	// Client is a shared xDS client to watch through, not closed by the
	// server. For the fault injection filter to be accepted on a server
	// Listener its registry needs RegisterServerFilters; without it such
	// a Listener is NACKed as a gRPC server's would be.
	Client *client.Client
	// ClientOptions tune the client the server makes; unused with Client.
	// Their Registry, if set, gets RegisterServerFilters.
	ClientOptions client.Options
	// ServingModeCallback, if set, is told each change of an address's
	// serving mode; without it the changes are logged (not serving and
	// why, as a warning, and serving again after it, as a warning too).
	ServingModeCallback func(addr net.Addr, args ServingModeChangeArgs)
	// Logger gets the server's warnings; nil: client.DefaultLogger().
	Logger *slog.Logger
	// HTTPServer is a template for the net/http server of each Listener
	// version: its timeouts, limits, ErrorLog and Protocols are used; its
	// Addr, Handler, TLSConfig and ConnContext are the server's own. nil:
	// an http.Server with a 10 s ReadHeaderTimeout that speaks HTTP/1.1,
	// HTTP/2 over TLS and HTTP/2 without TLS (prior knowledge).
	HTTPServer *http.Server
}

// Server serves an http.Handler configured by xDS (gRFC A36's model, with
// Envoy's HTTP semantics): each address it serves watches its Listener,
// serves only while that Listener is good, matches every connection to a
// filter chain (TLS from its DownstreamTlsContext), and routes, authorizes
// and fault-injects every request by the chain's configuration before the
// handler sees it.
type Server struct {
	h      http.Handler
	opts   Options
	b      *bootstrap.Config
	xc     *client.Client
	ownsXC bool
	logger *slog.Logger
	faults *route.Faults
	// authzChannels are the channels to the external authorization
	// services the Listeners' ext_authz filters name, made at the first
	// request that needs one and closed when the server stops.
	authzChannels extauthzgrpc.Channels

	// reports tells the serving-mode changes of every address.
	reports *serverlds.Reporter

	// listeners are the addresses served, for Close and Shutdown.
	listeners serverlds.Set[*generation]
	// wg counts the goroutines of generations (serving and draining).
	wg sync.WaitGroup
	// applied is the tests' hook (export_test.go): serverlds's
	// Config.Applied for each address served. Set before Serve.
	applied func()
}

// ErrServerClosed is what Serve returns after Close or Shutdown, as
// net/http's does.
var ErrServerClosed = http.ErrServerClosed

// NewServer returns a server of h. It fails when the bootstrap cannot be
// read or has no server_listener_resource_name_template, or the client
// cannot be made.
func NewServer(h http.Handler, opts Options) (*Server, error) {
	if h == nil {
		return nil, errors.New("httpxds: NewServer: nil handler")
	}
	s := &Server{h: h, opts: opts, faults: route.NewFaults(nil)}
	s.reports = serverlds.NewReporter(s.tell)
	s.logger = opts.Logger
	if s.logger == nil {
		s.logger = client.DefaultLogger()
	}
	var err error
	if s.b, err = sharedclient.Bootstrap(opts.Bootstrap, opts.Client); err != nil {
		return nil, fmt.Errorf("httpxds: %w", err)
	}
	if s.b.ServerListenerResourceNameTemplate == "" {
		return nil, errors.New("httpxds: the bootstrap has no server_listener_resource_name_template")
	}
	s.xc = opts.Client
	if s.xc == nil {
		co := opts.ClientOptions
		reg := co.Registry
		if reg == nil {
			reg = resources.DefaultRegistry()
		}
		co.Registry = reg.Clone()
		if err := RegisterServerFilters(co.Registry); err != nil {
			return nil, fmt.Errorf("httpxds: %w", err)
		}
		xc, err := client.New(s.b, co)
		if err != nil {
			return nil, fmt.Errorf("httpxds: creating the xDS client: %w", err)
		}
		s.xc, s.ownsXC = xc, true
	}
	return s, nil
}

// faultTypeURL is the fault injection filter's config.
const faultTypeURL = "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"

// RegisterServerFilters lets reg's clients accept the fault injection
// filter on a server Listener, where an HTTP server runs it (gRPC's server
// does not, and the default registry refuses it there as grpc-go does).
// Use it on the registry of a client shared with a Server (Options.Client).
func RegisterServerFilters(reg *resources.Registry) error {
	ft, ok := reg.LookupHTTPFilter(faultTypeURL)
	if !ok {
		return errors.New("the registry has no fault injection filter")
	}
	ft.ServerSide = true
	return reg.ReplaceHTTPFilter(ft)
}

// Serve serves on lis, configured by the Listener the bootstrap's template
// names for lis.Addr(). It blocks until lis fails or the server closes,
// and then closes lis. After Close or Shutdown it returns ErrServerClosed.
func (s *Server) Serve(lis net.Listener) error {
	// NewServer checked that the bootstrap has a template.
	name, _ := s.b.ServerListenerResourceName(lis.Addr().String())
	if err := s.listeners.Serve(newListener(s, lis, name).core); err != nil && err != serverlds.ErrStopped {
		return err
	}
	return ErrServerClosed
}

// Close closes every listener and connection at once, and the xDS client
// if the server made it. It returns when every goroutine of the server
// has ended (but for a certificate provider plugin's Build, which it does
// not wait for).
func (s *Server) Close() error {
	s.stop(context.Background(), false)
	return nil
}

// Shutdown closes every listener, then waits for the requests in progress
// to finish, as http.Server.Shutdown does, until ctx ends; then it closes
// what is left as Close does. It returns ctx's error if ctx ended first.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.stop(ctx, true)
}

func (s *Server) stop(ctx context.Context, graceful bool) error {
	ls, already := s.listeners.Stop()
	for _, l := range ls {
		l.Close(true)
	}
	var err error
	if graceful {
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	// Generations still serving or draining: at once now.
	for _, l := range ls {
		l.CloseAll()
	}
	s.wg.Wait()
	s.authzChannels.Close()
	if !already && s.ownsXC {
		s.xc.Close()
	}
	return err
}

// configError is an error the configuration caused, naming the xDS node
// ID, the first thing to look up on the management server.
func (s *Server) configError(format string, args ...any) error {
	return fmt.Errorf("httpxds: [xDS node id: %s]: %s", s.b.Node.ID, fmt.Sprintf(format, args...))
}

func (s *Server) warn(msg string, args ...any) {
	s.logger.Warn("httpxds: "+msg, args...)
}
