package grpcxds

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/resources"
)

// routePicker is the channel's picker: it takes the route and cluster the
// channel's interceptor chose when the RPC started, and lets that
// cluster's picker choose the endpoint. For an RPC that came without the
// interceptors, or whose cluster has left the configuration since it was
// chosen, it matches the RPC against the routes itself. It is immutable.
type routePicker struct {
	routes   []*resources.Route
	clusters cluster.PickerMap // the clusters' pickers, by name
	// plugins are the pickers of the RLS policies of routes that name a
	// cluster specifier plugin, by plugin name (rlsplugin.go).
	plugins   map[string]balancer.Picker
	channelID uint64
	gen       uint64 // of the channel configuration it was made from
	logger    *slog.Logger
	warned    *atomic.Bool // the balancer's warnedNoInterceptors
	// noInterceptors is the warning for an RPC without the goxds
	// interceptors (channelState.noInterceptors); "": the channel has them.
	noInterceptors string
	// needsMD: some route matches headers or hashes them, so the RPC's
	// metadata must be read.
	needsMD bool
	// authorities are the balancer's: the authority of each SubConn that
	// has one, for routes that rewrite it (authority.go).
	authorities *sync.Map
}

// headerHash hashes an RPC by one header of its metadata (ring_hash's
// requestHashHeader, gRFC A76): its values joined with ",", or a random
// hash when the RPC does not carry it.
func headerHash(ctx context.Context, name string) uint64 {
	md, _ := metadata.FromOutgoingContext(ctx)
	return route.HeaderHash(route.GRPCHeaders(md), name)
}

// noInterceptorsWarning is what the balancer logs at the first RPC of a
// channel built by Builder.Build, which has none of the goxds
// interceptors. It names what the user did, so that the fix is plain:
// registered says the channel found the Builder in gRPC's registry
// (Register, or resolver.Register) rather than in grpc.WithResolvers.
func noInterceptorsWarning(scheme string, registered bool) string {
	made := "its channel was made with grpc.WithResolvers(b) and no b.DialOptions()"
	if registered {
		made = "its channel was made with grpc.NewClient from a target of scheme " + strconv.Quote(scheme) + ", which grpcxds.Register registered, and no b.DialOptions()"
	}
	return "an RPC came without the goxds interceptors: " + made +
		"; route timeouts, retry policies and HTTP filters do not apply to it, and a waiting RPC may change cluster; " +
		"make the channel with grpcxds.NewClient(target, b), or b.DialOptions() in grpc.NewClient"
}

// pickObserverKey is the context key of a func(error) that tests put in an
// RPC's context to hear of every pick of that RPC and its outcome.
type pickObserverKey struct{}

// pickObservers is set once a test has asked to observe picks: until then
// Pick does not look for an observer in each RPC's context.
var pickObservers atomic.Bool

// Pick implements balancer.Picker.
func (p *routePicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	res, r, err := p.pick(info)
	if err == nil && r != nil && r.AutoHostRewrite {
		p.rewriteAuthority(&res)
	}
	observePick(info, err)
	return res, err
}

// observePick tells the test observing the RPC's picks (pickObserverKey),
// if any, of this one's outcome.
func observePick(info balancer.PickInfo, err error) {
	if pickObservers.Load() {
		if observe, ok := info.Ctx.Value(pickObserverKey{}).(func(error)); ok {
			observe(err)
		}
	}
}

// pick picks for the RPC of info, and returns the route it went by (nil
// when it failed).
func (p *routePicker) pick(info balancer.PickInfo) (balancer.PickResult, *resources.Route, error) {
	sel := selectionOf(info.Ctx)
	if sel == nil && p.noInterceptors != "" && p.warned.CompareAndSwap(false, true) {
		p.logger.Warn(p.noInterceptors, "method", info.FullMethodName)
	}
	if sel != nil && sel.route.ClusterSpecifierPlugin != "" {
		if res, ok, err := p.pluginPick(sel.route, sel, info); ok {
			return res, sel.route, err
		}
	} else if sel != nil {
		if cp := p.clusters.Get(sel.cluster); cp != nil {
			res, err := pickFor(cp, info, sel.hash, sel)
			_, isStatus := status.FromError(err)
			sel.statusPick.Store(err != nil && isStatus)
			return res, sel.route, err
		}
		if sel.gen > p.gen {
			// Chosen from a configuration whose picker is on its way.
			return balancer.PickResult{}, nil, balancer.ErrNoSubConnAvailable
		}
		// The cluster left the configuration after the RPC chose it:
		// grpc-go keeps such a cluster until its RPCs commit; goxds
		// routes the RPC again by the configuration in force.
	}
	req := route.Request{Path: info.FullMethodName, ChannelID: p.channelID}
	if p.needsMD {
		md, _ := metadata.FromOutgoingContext(info.Ctx)
		req.Headers = route.GRPCHeaders(md)
	}
	var d route.Decision
	if err := route.Select(p.routes, &req, &d); err != nil {
		return balancer.PickResult{}, nil, routeStatus(err, info.FullMethodName, "")
	}
	if d.Plugin != "" {
		res, _, err := p.pluginPick(d.Route, sel, info)
		return res, d.Route, err
	}
	cp := p.clusters.Get(d.Cluster)
	if cp == nil { // the snapshot has every cluster a route names
		return balancer.PickResult{}, nil, routeStatus(&route.Error{Kind: route.ClusterNotConfigured, Route: d.Route, Cluster: d.Cluster}, info.FullMethodName, "")
	}
	res, err := pickFor(cp, info, d.Hash, sel)
	if sel != nil {
		_, isStatus := status.FromError(err)
		sel.statusPick.Store(err != nil && isStatus)
	}
	return res, d.Route, err
}
