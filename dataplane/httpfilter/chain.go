package httpfilter

import (
	"context"
	"fmt"
	"strings"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/resources"
)

// Request is one request as the filters see it, given by the transport.
// The filters of one request run one after the other on the caller's
// goroutine, so the methods need not be safe for concurrent use.
type Request interface {
	// Headers are the request's headers as routing sees them: the fault
	// filter's x-envoy-fault-* headers are read through them.
	route.Headers
	// AuthzRequest is the request as an external authorization service is
	// told of it: its path and headers by lower-case name, and for plain
	// HTTP its method, host, scheme, protocol and size. Only the ext_authz
	// filter asks, so a transport may build it then. Time is set by the
	// filter.
	AuthzRequest() extauthz.Request
	// MutateHeaders changes the request's headers before it is sent (an
	// authorization service's ok_response); the filters after the one that
	// asked see the change.
	MutateHeaders(ms []extauthz.Mutation)
}

// AuthzClients gives the client of an authorization service named by a
// filter's GrpcService (gRFC A102): internal/extauthzgrpc's Channels,
// which the transport keeps open across configurations and closes with
// itself. The call is gRPC whatever the request's transport.
type AuthzClients interface {
	Client(gs *resources.GrpcService) (extauthz.Client, error)
}

// Env is what a transport keeps for its filters' runtimes across
// configurations.
type Env struct {
	// Client names the transport in errors, with its article: "a gRPC
	// client", "an HTTP client".
	Client string
	// Faults counts the active faults the fault filter caps (gRFC A33's
	// max_active_faults); the transport shares one across its
	// configurations (grpcxds: across the process, as grpc-go does).
	// nil: a count of the chain's own.
	Faults *route.Faults
	// Authz gives the clients of authorization services; nil: none can be
	// made, and every check fails (failure_mode_allow decides).
	Authz AuthzClients
	// AuthzPerRoute makes ext_authz follow Envoy's ExtAuthzPerRoute, as
	// an HTTP client must (its configuration is Envoy's): disabled turns
	// the filter off for the route, and check_settings.context_extensions
	// go to the service when Authz is an AuthzContextClients. gRPC leaves
	// it false: gRFC A92 ignores the override's fields
	// (resources.ExtAuthzPerRouteConfig).
	AuthzPerRoute bool
	// Procs gives the clients of external processing services; nil: the
	// transport does not run the external processing filter (it cannot
	// hand a processor a request's messages), which is then as a filter
	// of a kind the transport has no runtime for.
	Procs ProcClients
	// Owner is the transport's life: its end closes every external
	// processing stream, deferred closes included. nil: the streams
	// close with their requests only.
	Owner context.Context
	// ProcMetrics gives the measure of a request's external processing
	// events (gRFC A93's metrics), labelled as the transport labels that
	// request; nil, or a nil result: not measured.
	ProcMetrics func(req Request) extproc.Metrics
}

// AuthzContextClients is AuthzClients that can also give a client whose
// checks carry a route's check_settings.context_extensions (Envoy's
// ExtAuthzPerRoute, for Env.AuthzPerRoute).
type AuthzContextClients interface {
	AuthzClients
	ClientWithContext(gs *resources.GrpcService, contextExtensions map[string]string) (extauthz.Client, error)
}

// Denial ends a request before it is sent: what the filter that refused
// it answers, in the terms of each transport.
type Denial struct {
	// Filter is the refusing filter's name in the listener.
	Filter string
	// Code is the gRPC status code an RPC fails with. OK is a fault
	// abort's status OK: gRPC ends such an RPC as if the server had closed
	// it with OK and no response (gRFC A33).
	Code uint32
	// Message is the gRPC status's message, without a prefix naming the
	// library.
	Message string
	// MessageAsIs: Message is a status an external processor gave (gRFC
	// A93's immediate response), which the RPC fails with as given, with
	// no prefix added.
	MessageAsIs bool
	// HTTPStatus and Body are what an HTTP client answers. HTTPStatus 0
	// is a fault that gave a gRPC status only: an HTTP client answers as a
	// gRPC server's error would, 200 with grpc-status: Code.
	HTTPStatus int
	Body       string
	// Headers are the denial's headers (ext_authz's denied_response):
	// an HTTP answer's headers, a failed RPC's trailers.
	Headers []extauthz.Mutation
	// Err is the request context's error when it ended during a filter (a
	// fault's delay): a gRPC client fails the RPC as gRPC does for it
	// (DEADLINE_EXCEEDED, CANCELLED), whatever Code says.
	Err error
}

// Runtime runs one kind of HTTP filter on a client's requests.
type Runtime interface {
	// Start runs the filter for one request with config, the filter's
	// effective configuration as its resources.HTTPFilterType parsed it.
	// A non-nil denial ends the request; otherwise release, if not nil,
	// is called once when the request ends, and respHeaders, if any,
	// change the response headers the application sees. Start may block
	// (a delay, a call to a service), but returns when ctx is done.
	Start(ctx context.Context, config resources.HTTPFilterConfig, req Request) (release func(), respHeaders []extauthz.Mutation, d *Denial)
}

// The full names of the configuration messages of the filters clients
// run.
const (
	FaultConfigName    = "envoy.extensions.filters.http.fault.v3.HTTPFault"
	ExtAuthzConfigName = "envoy.extensions.filters.http.ext_authz.v3.ExtAuthz"
	ExtProcConfigName  = "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"
)

// runtimes makes the client-side runtime of each HTTP filter kind, by the
// full name of its top-level configuration message, given the listener's
// filter and what the transport keeps. A runtime is made once per filter
// per configuration; what must outlive it (the count of active faults,
// the channels to authorization services) is the Env's. The router has
// none: it is the transport. Server-side runtimes (RBAC) are the servers'.
var runtimes = map[string]func(f *resources.HTTPFilter, env Env) Runtime{
	FaultConfigName: func(f *resources.HTTPFilter, env Env) Runtime { return faultRuntime{name: f.Name, faults: env.Faults} },
	ExtAuthzConfigName: func(f *resources.HTTPFilter, env Env) Runtime {
		return &authzRuntime{name: f.Name, top: f.Parsed, clients: env.Authz, perRoute: env.AuthzPerRoute}
	},
	// nil where the transport gives no processing clients (Env.Procs).
	ExtProcConfigName: func(f *resources.HTTPFilter, env Env) Runtime {
		if env.Procs == nil {
			return nil
		}
		owner := env.Owner
		if owner == nil {
			owner = context.Background()
		}
		return &procRuntime{name: f.Name, top: f.Parsed, clients: env.Procs, owner: owner, metrics: env.ProcMetrics}
	},
}

// messageName is the message name of a type URL: what follows the last '/'.
func messageName(typeURL string) string {
	return typeURL[strings.LastIndexByte(typeURL, '/')+1:]
}

// Chain is what a transport runs of one listener's HTTP filters, made once
// per configuration. It is safe for concurrent use.
type Chain struct {
	// filters are the listener's non-terminal filters that run, in order.
	filters []chainFilter
	// byIndex are the runtimes by the filter's index in the listener; nil
	// for the router and for optional filters clients cannot run.
	byIndex []Runtime
	err     error
}

// chainFilter is one filter of the chain with its runtime.
type chainFilter struct {
	filter *resources.HTTPFilter
	rt     Runtime
}

// NewChain builds the chain of l's filters (l nil: none). The resources
// package has already left out the optional filters clients cannot run
// and rejected listeners with required ones; a filter type registered
// there that has no client runtime here makes the chain unusable (Err),
// unless it is optional, when it is skipped.
func NewChain(l *resources.Listener, env Env) *Chain {
	c := &Chain{}
	if l == nil {
		return c
	}
	if env.Faults == nil {
		env.Faults = route.NewFaults(nil)
	}
	if env.Client == "" {
		env.Client = "a client"
	}
	c.byIndex = make([]Runtime, len(l.HTTPFilters))
	for i := range l.HTTPFilters {
		f := &l.HTTPFilters[i]
		if f.Terminal {
			continue
		}
		if _, router := f.Parsed.(*resources.RouterConfig); router {
			continue
		}
		mk, ok := runtimes[messageName(f.TypeURL)]
		var rt Runtime
		if ok {
			rt = mk(f, env)
		}
		if rt == nil {
			if f.IsOptional {
				continue
			}
			// Nothing of the chain runs: Err fails every request.
			return &Chain{err: fmt.Errorf("HTTP filter %q of type %s cannot run on %s", f.Name, f.TypeURL, env.Client)}
		}
		c.byIndex[i] = rt
		c.filters = append(c.filters, chainFilter{filter: f, rt: rt})
	}
	return c
}

// Err is why the chain cannot run (nil: it can): every request fails
// with it.
func (c *Chain) Err() error {
	if c == nil {
		return nil
	}
	return c.err
}

// Empty reports whether no filter runs: a transport skips the chain.
func (c *Chain) Empty() bool { return c == nil || len(c.filters) == 0 }

// Result is what a chain's run decided for one request.
type Result struct {
	// Denial, when not nil, ends the request: it is not sent, and what
	// the filters started is already released.
	Denial *Denial
	// Release ends what the filters started, once, when the request ends;
	// nil when nothing was started (most requests: they allocate nothing).
	Release func()
	// ResponseHeaders change the response headers the application sees,
	// in the filters' order.
	ResponseHeaders []extauthz.Mutation
	// Procs are the external processing filters that run on the rest of
	// the request, in the filters' order (nil for most requests): the
	// transport hands them its messages and its response, and releases
	// each (Proc.Release) once it has handed them the response's end, which
	// may come after Release: the rest of the chain is over sooner. The
	// request's context ending releases them too.
	Procs []*Proc
}

// Run runs fs, the filters routing chose for a request with their
// effective configurations (route.Decision.Filters), in order. The first
// to deny ends the run.
func (c *Chain) Run(ctx context.Context, fs []route.FilterConfig, req Request) Result {
	var r run
	for _, f := range fs {
		if c == nil || f.Index >= len(c.byIndex) || c.byIndex[f.Index] == nil {
			continue
		}
		if !r.step(ctx, c.byIndex[f.Index], f.Config, req) {
			break
		}
	}
	return r.result()
}

// RunRoute runs the chain's filters for a request of virtual host vh
// routed by rt, to its weighted cluster wc when wc >= 0: each with its
// most specific typed_per_filter_config override (weighted cluster,
// route, virtual host), and not where an override disables it.
func (c *Chain) RunRoute(ctx context.Context, vh *resources.VirtualHost, rt *resources.Route, wc int, req Request) Result {
	var r run
	if c == nil {
		return r.result()
	}
	var wcOverrides, vhOverrides map[string]resources.HTTPFilterConfig
	if wc >= 0 {
		wcOverrides = rt.WeightedClusters[wc].FilterOverrides
	}
	if vh != nil {
		vhOverrides = vh.FilterOverrides
	}
	for _, f := range c.filters {
		config, on := f.filter.EffectiveConfig(wcOverrides, rt.FilterOverrides, vhOverrides)
		if !on {
			continue
		}
		if !r.step(ctx, f.rt, config, req) {
			break
		}
	}
	return r.result()
}

// run is one request's run through a chain.
type run struct {
	releases    []func()
	respHeaders []extauthz.Mutation
	procs       []*Proc
	denial      *Denial
}

// step runs one filter; false: it denied the request, and what the
// filters before it started is released.
func (r *run) step(ctx context.Context, rt Runtime, config resources.HTTPFilterConfig, req Request) bool {
	var release func()
	var rh []extauthz.Mutation
	var d *Denial
	if pr, ok := rt.(*procRuntime); ok {
		// The filter goes on past the headers: the transport needs its call.
		var p *Proc
		if p, d = pr.startProc(ctx, config, req); d == nil {
			r.procs = append(r.procs, p)
		}
	} else {
		release, rh, d = rt.Start(ctx, config, req)
	}
	if d != nil {
		releaseInReverse(r.releases)
		for i := len(r.procs) - 1; i >= 0; i-- {
			r.procs[i].Release()
		}
		r.releases, r.respHeaders, r.procs, r.denial = nil, nil, nil, d
		return false
	}
	if release != nil {
		r.releases = append(r.releases, release)
	}
	if len(rh) > 0 {
		r.respHeaders = append(r.respHeaders, rh...)
	}
	return true
}

func (r *run) result() Result {
	out := Result{Denial: r.denial, ResponseHeaders: r.respHeaders, Procs: r.procs}
	switch len(r.releases) {
	case 0:
	case 1:
		out.Release = r.releases[0]
	default:
		releases := r.releases
		out.Release = func() { releaseInReverse(releases) }
	}
	return out
}

// releaseInReverse releases what filters started, the last first.
func releaseInReverse(releases []func()) {
	for i := len(releases) - 1; i >= 0; i-- {
		releases[i]()
	}
}
