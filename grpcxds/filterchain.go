package grpcxds

import (
	"context"
	"fmt"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/resources"
)

// The HTTP filters of a listener run on every RPC of its channels (gRFC
// A39), in order, before the RPC is sent; the router, always last, is the
// channel itself. Each filter runs with its effective configuration for
// the RPC: the most specific typed_per_filter_config override (the
// weighted cluster's, else the route's, else the virtual host's), else its
// own. An override wrapped in a FilterConfig with disabled set switches the
// filter off there; a filter disabled in the listener runs only where an
// override switches it on.

// clientFilterRuntime runs one kind of HTTP filter on a client's RPCs.
type clientFilterRuntime interface {
	// start runs the filter for one RPC, whose outgoing metadata is md,
	// with config, the filter's effective configuration. A non-nil error
	// fails the RPC with it (a status error keeps its code); otherwise
	// release, if not nil, is called once when the RPC ends. start may
	// block (a delay) but must return when ctx is done.
	start(ctx context.Context, config any, md metadata.MD) (release func(), err error)
}

// clientFilterRuntimes makes the client-side runtime of each HTTP filter
// kind gRPC clients run, by the full name of its configuration message. A
// runtime is made once per channel configuration; per-channel state (a
// count of active faults) lives in it. The router has none: it is the
// channel. Server-side runtimes (RBAC) belong to the server package's own
// registry.
var clientFilterRuntimes = map[string]func() clientFilterRuntime{}

// routerConfigName is the router filter's configuration message.
const routerConfigName = "envoy.extensions.filters.http.router.v3.Router"

// filterConfigName is the wrapper of an override that can switch its
// filter off.
const filterConfigName = "envoy.config.route.v3.FilterConfig"

// filterChain is a listener's HTTP filters as a channel runs them, made
// once per configuration.
type filterChain struct {
	filters []chainFilter // in order, the router left out
	// err is why the chain cannot run: every RPC fails with it.
	err error
}

type chainFilter struct {
	name     string
	runtime  clientFilterRuntime
	config   any  // the filter's own configuration
	disabled bool // runs only where an override switches it on
}

// filterCall is one filter to run for one RPC, with its effective
// configuration.
type filterCall struct {
	runtime clientFilterRuntime
	config  any
}

// messageName is the message name of a type URL: what follows the last '/'.
func messageName(typeURL string) string {
	return typeURL[strings.LastIndexByte(typeURL, '/')+1:]
}

// newFilterChain builds the chain of l's filters. An optional filter gRPC
// clients cannot run is left out; a required one makes the chain unusable
// (its Listener should have been rejected; gRFC A39).
func newFilterChain(l *resources.Listener) *filterChain {
	c := &filterChain{}
	if l == nil {
		return c
	}
	for _, f := range l.HTTPFilters {
		name := messageName(f.TypeURL)
		if name == routerConfigName {
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
		c.filters = append(c.filters, chainFilter{name: f.Name, runtime: mk(), config: f.Config, disabled: f.Disabled})
	}
	return c
}

// forRPC returns the filters to run for an RPC of virtual host vh routed
// by r to cluster (a weighted cluster of r when weighted), each with its
// effective configuration.
func (c *filterChain) forRPC(vh *resources.VirtualHost, r *resources.Route, cluster string, weighted bool) ([]filterCall, error) {
	if c.err != nil {
		return nil, c.err
	}
	if len(c.filters) == 0 {
		return nil, nil
	}
	levels := make([]map[string]*anypb.Any, 0, 3)
	if weighted {
		for _, wc := range r.Raw.GetRoute().GetWeightedClusters().GetClusters() {
			if wc.GetName() == cluster {
				levels = append(levels, wc.GetTypedPerFilterConfig())
				break
			}
		}
	}
	levels = append(levels, r.Raw.GetTypedPerFilterConfig())
	if vh != nil {
		levels = append(levels, vh.Raw.GetTypedPerFilterConfig())
	}
	calls := make([]filterCall, 0, len(c.filters))
	for _, f := range c.filters {
		config, on := f.config, !f.disabled
		for _, level := range levels {
			o, ok := level[f.name]
			if !ok {
				continue
			}
			var err error
			if config, on, err = unwrapOverride(o); err != nil {
				return nil, fmt.Errorf("HTTP filter %q override: %v", f.name, err)
			}
			break
		}
		if on {
			calls = append(calls, filterCall{runtime: f.runtime, config: config})
		}
	}
	return calls, nil
}

// unwrapOverride reads a typed_per_filter_config entry: the config, and
// whether the filter runs.
func unwrapOverride(o *anypb.Any) (config any, on bool, err error) {
	if messageName(o.GetTypeUrl()) != filterConfigName {
		return o, true, nil
	}
	fc := new(routev3.FilterConfig)
	if err := proto.Unmarshal(o.GetValue(), fc); err != nil {
		return nil, false, err
	}
	if fc.GetDisabled() {
		return nil, false, nil
	}
	return fc.GetConfig(), true, nil
}
