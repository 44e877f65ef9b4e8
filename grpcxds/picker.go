package grpcxds

import (
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/resources"
)

// routePicker is the channel's picker: it takes the route and cluster the
// channel's interceptor chose when the RPC started, and lets that
// cluster's picker choose the endpoint. For an RPC that came without the
// interceptors, or whose cluster has left the configuration since it was
// chosen, it matches the RPC against the routes itself. It is immutable.
type routePicker struct {
	routes   []*resources.Route
	clusters pickerMap
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
}

// clusterPicker picks an endpoint of one cluster for an RPC whose request
// hash (for ring_hash) is hash.
type clusterPicker interface {
	pick(info balancer.PickInfo, hash uint64) (balancer.PickResult, error)
}

// routesNeedMD reports whether some route matches headers or hashes
// them.
func routesNeedMD(routes []*resources.Route) bool {
	for _, r := range routes {
		if len(r.Headers) > 0 || len(r.HashPolicies) > 0 {
			return true
		}
	}
	return false
}

// pickWeighted returns the index of a cluster drawn at random in
// proportion to the weights, which validation keeps above 0 in sum.
func pickWeighted(wcs []resources.WeightedCluster) int {
	var total uint64
	for _, wc := range wcs {
		total += uint64(wc.Weight)
	}
	n := rand.Uint64N(total)
	for i, wc := range wcs {
		if n < uint64(wc.Weight) {
			return i
		}
		n -= uint64(wc.Weight)
	}
	return len(wcs) - 1
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

// Pick implements balancer.Picker.
func (p *routePicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	res, err := p.pick(info)
	if observe, ok := info.Ctx.Value(pickObserverKey{}).(func(error)); ok {
		observe(err)
	}
	return res, err
}

func (p *routePicker) pick(info balancer.PickInfo) (balancer.PickResult, error) {
	var md metadata.MD
	if p.needsMD {
		md, _ = metadata.FromOutgoingContext(info.Ctx)
	}
	sel := selectionOf(info.Ctx)
	if sel == nil && p.noInterceptors != "" && p.warned.CompareAndSwap(false, true) {
		p.logger.Warn(p.noInterceptors, "method", info.FullMethodName)
	}
	if sel != nil && sel.route.ClusterSpecifierPlugin != "" {
		if res, ok, err := p.pluginPick(sel.route, sel, info); ok {
			return res, err
		}
	} else if sel != nil {
		if cp := p.clusters.get(sel.cluster); cp != nil {
			res, err := cp.pick(info, sel.hash)
			_, isStatus := status.FromError(err)
			sel.statusPick.Store(err != nil && isStatus)
			return res, err
		}
		if sel.gen > p.gen {
			// Chosen from a configuration whose picker is on its way.
			return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
		}
		// The cluster left the configuration after the RPC chose it:
		// grpc-go keeps such a cluster until its RPCs commit; goxds
		// routes the RPC again by the configuration in force.
	}
	r := p.match(info.FullMethodName, md)
	if r == nil {
		return balancer.PickResult{}, status.Errorf(codes.Unavailable, "goxds: no route matches RPC %s", info.FullMethodName)
	}
	if r.Action != resources.RouteActionRoute {
		return balancer.PickResult{}, status.Errorf(codes.Unavailable,
			"goxds: RPC %s matched route %s, whose action %v a gRPC client cannot carry out", info.FullMethodName, describeRoute(r), r.Action)
	}
	if r.ClusterSpecifierPlugin != "" {
		res, _, err := p.pluginPick(r, sel, info)
		return res, err
	}
	name := r.Cluster
	if name == "" {
		name = r.WeightedClusters[pickWeighted(r.WeightedClusters)].Name
	}
	cp := p.clusters.get(name)
	if cp == nil { // the snapshot has every cluster a route names
		return balancer.PickResult{}, status.Errorf(codes.Unavailable, "goxds: route %s names cluster %q, which is not configured", describeRoute(r), name)
	}
	res, err := cp.pick(info, requestHash(r.HashPolicies, md, p.channelID))
	if sel != nil {
		_, isStatus := status.FromError(err)
		sel.statusPick.Store(err != nil && isStatus)
	}
	return res, err
}

// match returns the first route that matches the RPC, or nil.
func (p *routePicker) match(method string, md metadata.MD) *resources.Route {
	for _, r := range p.routes {
		if matchRoute(r, method, md) {
			return r
		}
	}
	return nil
}

// matchRoute reports whether r matches an RPC to method with metadata md,
// its headers as header sees them.
func matchRoute(r *resources.Route, method string, md metadata.MD) bool {
	return r.MatchGRPC(method, func(name string) (string, bool) { return header(md, name) })
}

// header returns the value of a request header as route matching and hash
// policies see it: every value joined with ",". Binary headers ("-bin")
// are never seen, and content-type is always "application/grpc", as gRPC
// sends it.
func header(md metadata.MD, name string) (string, bool) {
	switch {
	case strings.HasSuffix(name, "-bin"):
		return "", false
	case name == "content-type":
		return "application/grpc", true
	}
	vs := md[name]
	if len(vs) == 0 {
		return "", false
	}
	if len(vs) == 1 {
		return vs[0], true
	}
	return strings.Join(vs, ","), true
}

// describeRoute names a route for error messages: by its name, else by its
// path matcher.
func describeRoute(r *resources.Route) string {
	if r.Name != "" {
		return strconv.Quote(r.Name)
	}
	switch r.PathMatch {
	case resources.PathMatchExact:
		return "path:" + strconv.Quote(r.Path)
	case resources.PathMatchRegex:
		return "safe_regex:" + strconv.Quote(r.RegexPattern())
	}
	return "prefix:" + strconv.Quote(r.Prefix)
}
