package grpcxds

import (
	"context"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/resources"
)

// selection is what an RPC's interceptor chose when the RPC started, for
// the picker: the route and the cluster, fixed for the RPC's life and
// every attempt of it (gRFC A31), so that an RPC waiting for its cluster is
// not drawn again at each new picker.
type selection struct {
	gen     uint64 // the configuration's generation
	route   *resources.Route
	cluster string
	// hash is the RPC's request hash for ring_hash, computed once, as
	// grpc-go does: an RPC whose route hashes nothing gets one random hash,
	// not a new one at each pick.
	hash uint64
	// statusPick: the last pick failed with a status error (a drop, a
	// circuit breaker, no route), which gRPC hands the RPC without any
	// retry.
	statusPick atomic.Bool
}

// selectionKey is the context key of an RPC's *selection.
type selectionKey struct{}

// selectionOf returns the selection of an RPC, or nil for an RPC that did
// not pass through the goxds interceptors.
func selectionOf(ctx context.Context) *selection {
	s, _ := ctx.Value(selectionKey{}).(*selection)
	return s
}

// rpcConfig is what applies to one RPC: its selection, its timeout, its
// retry policy, and the HTTP filters to run with their configurations.
type rpcConfig struct {
	sel     *selection
	timeout time.Duration // 0: none
	retry   *retryPolicy  // nil: no retries
	filters []filterCall
}

// selectRPC chooses the route and cluster of an RPC to method whose
// outgoing metadata is md, as grpc-go's config selector does: the first
// matching route, and for weighted clusters one drawn by weight.
func (c *channelConfig) selectRPC(method string, md metadata.MD, channelID uint64) (*rpcConfig, error) {
	vh := c.snap.VirtualHost
	var r *resources.Route
	if vh != nil {
		for _, rt := range vh.Routes {
			if matchRoute(rt, method, md) {
				r = rt
				break
			}
		}
	}
	if r == nil {
		return nil, status.Errorf(codes.Unavailable, "goxds: no route matches RPC %s (xDS node ID %q)", method, c.nodeID)
	}
	if r.Action != resources.RouteActionRoute {
		return nil, status.Errorf(codes.Unavailable,
			"goxds: RPC %s matched route %s, whose action %v a gRPC client cannot carry out (xDS node ID %q)", method, describeRoute(r), r.Action, c.nodeID)
	}
	wc := -1
	name := r.Cluster
	if name == "" && len(r.WeightedClusters) == 0 && r.ClusterSpecifierPlugin == "" { // validation promises otherwise
		return nil, status.Errorf(codes.Unavailable, "goxds: RPC %s matched route %s, which names no cluster (xDS node ID %q)", method, describeRoute(r), c.nodeID)
	}
	if name == "" && len(r.WeightedClusters) > 0 {
		// (A route by a cluster specifier plugin has its cluster chosen
		// at the pick, by the plugin's RLS policy: rlsplugin.go.)
		wc = pickWeighted(r.WeightedClusters)
		name = r.WeightedClusters[wc].Name
	}
	rc := &rpcConfig{
		sel:     &selection{gen: c.gen, route: r, cluster: name, hash: requestHash(r.HashPolicies, md, channelID)},
		timeout: timeoutOf(r, c.snap.Listener),
		retry:   c.retryPolicyOf(r, vh),
	}
	if c.chain != nil {
		var err error
		if rc.filters, err = c.chain.forRPC(vh, r, wc); err != nil {
			return nil, status.Errorf(codes.Unavailable, "goxds: RPC %s, route %s: %v (xDS node ID %q)", method, describeRoute(r), err, c.nodeID)
		}
	}
	return rc, nil
}

// timeoutOf is the bound gRFC A31 puts on an RPC routed by r, as grpc-go
// computes it: the route's max_stream_duration.grpc_timeout_header_max,
// else its max_stream_duration.max_stream_duration, else the connection
// manager's max_stream_duration. Zero means none. The route's own timeout
// field is not used by gRPC. The application's deadline still applies
// when it is earlier.
func timeoutOf(r *resources.Route, l *resources.Listener) time.Duration {
	switch {
	case r.GRPCTimeoutHeaderMax != nil:
		return *r.GRPCTimeoutHeaderMax
	case r.MaxStreamDuration != nil:
		return *r.MaxStreamDuration
	case l != nil:
		return l.MaxStreamDuration
	}
	return 0
}
