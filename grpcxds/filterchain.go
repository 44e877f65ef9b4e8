package grpcxds

import (
	"context"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
)

// The HTTP filters of a listener run on every RPC of its channels (gRFC
// A39); which run for an RPC, with what configuration (the per-route
// overrides resolved), is dataplane/route's. Parsing and validation are
// the resources package's (its HTTP filter registry); what a filter does
// on a gRPC client is here: its client runtime.

// clientFilterRuntime runs one kind of HTTP filter on a client's RPCs.
type clientFilterRuntime interface {
	// start runs the filter for one RPC, whose headers are h, with config,
	// the filter's effective configuration as its resources.HTTPFilterType
	// parsed it. A non-nil error fails the RPC with it (a status error
	// keeps its code); otherwise release, if not nil, is called once when
	// the RPC ends, and respHeaders, if any, change the response headers
	// the application sees (ext_authz's response_headers_to_add). start
	// may block (a delay), but returns when ctx is done.
	start(ctx context.Context, config resources.HTTPFilterConfig, h route.Headers) (release func(), respHeaders []extauthz.Mutation, err error)
}

// clientFilterRuntimes makes the client-side runtime of each HTTP filter
// kind gRPC clients run, by the full name of its configuration message,
// given the listener's filter and what the channel keeps for filters. A
// runtime is made once per filter per channel configuration; state that
// must outlive it (the count of active faults, the channels to
// authorization services) lives elsewhere. The router has none: it is the
// channel. Server-side runtimes (RBAC) belong to a server package's own
// registry, keyed the same way.
var clientFilterRuntimes = map[string]func(f *resources.HTTPFilter, env filterEnv) clientFilterRuntime{
	faultConfigName: func(*resources.HTTPFilter, filterEnv) clientFilterRuntime { return faultRuntime{processFaults} },
	extAuthzConfigName: func(f *resources.HTTPFilter, env filterEnv) clientFilterRuntime {
		return extAuthzRuntime{top: f.Parsed, channels: env.authz}
	},
}

// filterEnv is what a channel keeps for its filters' runtimes, across
// configurations.
type filterEnv struct {
	// authz are the channels to external authorization services (gRFC
	// A92), closed with the channel's resolver; nil: none can be made.
	authz *extauthzgrpc.Channels
}

// processFaults is the fault filter of every channel: gRFC A33's
// max_active_faults caps the faults of the whole process, as grpc-go
// counts them, across channels and configuration updates.
var processFaults = newFaultFilter(nil)

// faultConfigName is the fault injection filter's configuration message.
const faultConfigName = "envoy.extensions.filters.http.fault.v3.HTTPFault"

// faultRuntime runs the fault injection filter (gRFC A33, fault.go). It
// starts nothing that lasts the RPC: its release is nil.
type faultRuntime struct{ f *faultFilter }

func (r faultRuntime) start(ctx context.Context, config resources.HTTPFilterConfig, h route.Headers) (func(), []extauthz.Mutation, error) {
	cfg, ok := config.(*resources.FaultConfig)
	if !ok {
		return nil, nil, fmt.Errorf("fault filter: config is a %T", config)
	}
	return nil, nil, r.f.injectHeaders(ctx, cfg, h)
}

// messageName is the message name of a type URL: what follows the last '/'.
func messageName(typeURL string) string {
	return typeURL[strings.LastIndexByte(typeURL, '/')+1:]
}

// filterChain is what a channel runs of a listener's HTTP filters, made
// once per configuration.
type filterChain struct {
	// runtimes are the runtimes of the listener's filters, by their index
	// in it; nil for the router and for optional filters gRPC clients
	// cannot run, which are skipped.
	runtimes []clientFilterRuntime
	// err is why the chain cannot run: every RPC fails with it.
	err error
}

// newFilterChain builds the chain of l's filters. The resources package
// has already left out the optional filters gRPC clients cannot run and
// rejected listeners with required ones; a filter type registered there
// that has no client runtime here makes the chain unusable, unless
// optional. env is what the channel keeps for the runtimes.
func newFilterChain(l *resources.Listener, env filterEnv) *filterChain {
	c := &filterChain{}
	if l == nil {
		return c
	}
	c.runtimes = make([]clientFilterRuntime, len(l.HTTPFilters))
	for i := range l.HTTPFilters {
		f := &l.HTTPFilters[i]
		name := messageName(f.TypeURL)
		if f.Terminal {
			continue
		}
		mk, ok := clientFilterRuntimes[name]
		if !ok {
			if f.IsOptional {
				continue
			}
			c.err = fmt.Errorf("HTTP filter %q of type %s cannot run on a gRPC client", f.Name, f.TypeURL)
			return c
		}
		c.runtimes[i] = mk(f, env)
	}
	return c
}

// runtime returns the runtime of filter f of an RPC, nil if the channel
// skips it.
func (c *filterChain) runtime(f route.FilterConfig) clientFilterRuntime {
	if c == nil || f.Index >= len(c.runtimes) {
		return nil
	}
	return c.runtimes[f.Index]
}

// endedStream is the stream of an RPC a fault abort with status OK ended
// before it was sent: gRPC's outcome is a stream that is over, with no
// header and no message.
type endedStream struct{ ctx context.Context }

func (endedStream) Header() (metadata.MD, error) { return nil, nil }
func (endedStream) Trailer() metadata.MD         { return nil }
func (endedStream) CloseSend() error             { return nil }
func (s endedStream) Context() context.Context   { return s.ctx }
func (endedStream) SendMsg(any) error            { return io.EOF }
func (endedStream) RecvMsg(any) error            { return io.EOF }

var _ grpc.ClientStream = endedStream{}
