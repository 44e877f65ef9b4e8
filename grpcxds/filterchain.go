package grpcxds

import (
	"context"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/resources"
)

// The HTTP filters of a listener run on every RPC of its channels (gRFC
// A39), in order, before the RPC is sent; the router, always last, is the
// channel itself. Each filter runs with its effective configuration for
// the RPC: the most specific typed_per_filter_config override (the
// weighted cluster's, else the route's, else the virtual host's), else its
// own. An override that disables the filter (a FilterConfig with disabled
// set) switches it off there; a filter disabled in the listener runs only
// where an override switches it on. Parsing and validation are the
// resources package's (its HTTP filter registry); what runs is here.

// clientFilterRuntime runs one kind of HTTP filter on a client's RPCs.
type clientFilterRuntime interface {
	// start runs the filter for one RPC, whose outgoing metadata is md,
	// with config, the filter's effective configuration as its
	// resources.HTTPFilterType parsed it. A non-nil error fails the RPC
	// with it (a status error keeps its code); otherwise release, if not
	// nil, is called once when the RPC ends. start may block (a delay),
	// but returns when ctx is done.
	start(ctx context.Context, config resources.HTTPFilterConfig, md metadata.MD) (release func(), err error)
}

// clientFilterRuntimes makes the client-side runtime of each HTTP filter
// kind gRPC clients run, by the full name of its configuration message. A
// runtime is made once per filter per channel configuration; state that
// must outlive it (the count of active faults) lives elsewhere. The router has none:
// it is the channel. Server-side runtimes (RBAC) belong to a server
// package's own registry, keyed the same way.
var clientFilterRuntimes = map[string]func() clientFilterRuntime{
	faultConfigName: func() clientFilterRuntime { return faultRuntime{processFaults} },
}

// processFaults is the fault filter of every channel: gRFC A33's
// max_active_faults caps the faults of the whole process, as grpc-go
// counts them, across channels and configuration updates.
var processFaults = newFaultFilter(nil)

// faultConfigName is the fault injection filter's configuration message.
const faultConfigName = "envoy.extensions.filters.http.fault.v3.HTTPFault"

// faultRuntime runs the fault injection filter (gRFC A33, fault.go).
type faultRuntime struct{ f *faultFilter }

func (r faultRuntime) start(ctx context.Context, config resources.HTTPFilterConfig, md metadata.MD) (func(), error) {
	cfg, ok := config.(*resources.FaultConfig)
	if !ok {
		return nil, fmt.Errorf("fault filter: config is a %T", config)
	}
	return r.f.inject(ctx, cfg, md)
}

// messageName is the message name of a type URL: what follows the last '/'.
func messageName(typeURL string) string {
	return typeURL[strings.LastIndexByte(typeURL, '/')+1:]
}

// filterChain is a listener's HTTP filters as a channel runs them, made
// once per configuration.
type filterChain struct {
	filters []chainFilter // in order, the terminal router left out
	// err is why the chain cannot run: every RPC fails with it.
	err error
}

type chainFilter struct {
	filter  *resources.HTTPFilter // the listener's (shared, not modified)
	runtime clientFilterRuntime
}

// filterCall is one filter to run for one RPC, with its effective
// configuration.
type filterCall struct {
	runtime clientFilterRuntime
	config  resources.HTTPFilterConfig
}

// newFilterChain builds the chain of l's filters. The resources package
// has already left out the optional filters gRPC clients cannot run and
// rejected listeners with required ones; a filter type registered there
// that has no client runtime here makes the chain unusable, unless
// optional.
func newFilterChain(l *resources.Listener) *filterChain {
	c := &filterChain{}
	if l == nil {
		return c
	}
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
		c.filters = append(c.filters, chainFilter{filter: f, runtime: mk()})
	}
	return c
}

// forRPC returns the filters to run for an RPC of virtual host vh routed
// by r, to its weighted cluster wc when wc >= 0, each with its effective
// configuration.
func (c *filterChain) forRPC(vh *resources.VirtualHost, r *resources.Route, wc int) ([]filterCall, error) {
	if c.err != nil {
		return nil, c.err
	}
	if len(c.filters) == 0 {
		return nil, nil
	}
	levels := make([]map[string]resources.HTTPFilterConfig, 0, 3)
	if wc >= 0 {
		levels = append(levels, r.WeightedClusters[wc].FilterOverrides)
	}
	levels = append(levels, r.FilterOverrides)
	if vh != nil {
		levels = append(levels, vh.FilterOverrides)
	}
	calls := make([]filterCall, 0, len(c.filters))
	for _, f := range c.filters {
		if config, on := f.filter.EffectiveConfig(levels...); on {
			calls = append(calls, filterCall{runtime: f.runtime, config: config})
		}
	}
	return calls, nil
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
