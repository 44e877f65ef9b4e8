package grpcxds

import (
	"math/rand/v2"
	"strconv"
	"strings"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/resources"
)

// routePicker is the channel's picker: it matches each RPC against the
// routes of the virtual host in force, chooses the route's cluster, and
// lets that cluster's picker choose the endpoint. It is immutable.
type routePicker struct {
	routes    []*resources.Route
	clusters  map[string]clusterPicker
	channelID uint64
	// needsMD: some route matches headers or hashes them, so the RPC's
	// metadata must be read.
	needsMD bool
}

// clusterPicker picks an endpoint of one cluster for an RPC whose request
// hash (for ring_hash) is hash.
type clusterPicker interface {
	pick(info balancer.PickInfo, hash uint64) (balancer.PickResult, error)
}

func (p *routePicker) init() {
	for _, r := range p.routes {
		if len(r.Headers) > 0 || len(r.HashPolicies) > 0 {
			p.needsMD = true
		}
	}
}

// Pick implements balancer.Picker.
func (p *routePicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	var md metadata.MD
	if p.needsMD {
		md, _ = metadata.FromOutgoingContext(info.Ctx)
	}
	r := p.match(info.FullMethodName, md)
	if r == nil {
		return balancer.PickResult{}, status.Errorf(codes.Unavailable, "goxds: no route matches RPC %s", info.FullMethodName)
	}
	if r.Action != resources.RouteActionRoute {
		return balancer.PickResult{}, status.Errorf(codes.Unavailable,
			"goxds: RPC %s matched route %s, whose action %v a gRPC client cannot carry out", info.FullMethodName, describeRoute(r), r.Action)
	}
	name := r.Cluster
	if name == "" {
		name = pickWeighted(r.WeightedClusters)
	}
	cp := p.clusters[name]
	if cp == nil { // the snapshot has every cluster a route names
		return balancer.PickResult{}, status.Errorf(codes.Unavailable, "goxds: route %s names cluster %q, which is not configured", describeRoute(r), name)
	}
	return cp.pick(info, requestHash(r.HashPolicies, md, p.channelID))
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

// matchRoute reports whether r matches an RPC to method with metadata md:
// the path matcher, every header matcher, and the runtime fraction. gRPC
// requests carry no query string, so a route with query parameter matchers
// never matches.
func matchRoute(r *resources.Route, method string, md metadata.MD) bool {
	if !r.MatchPath(method) || len(r.QueryParameters) > 0 {
		return false
	}
	for _, h := range r.Headers {
		value, present := header(md, h.Name())
		if !h.Match(value, present) {
			return false
		}
	}
	if r.RuntimeFraction >= 0 && rand.Int32N(1_000_000) >= r.RuntimeFraction {
		return false
	}
	return true
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

// pickWeighted picks a cluster at random in proportion to the weights,
// which validation keeps above 0 in sum.
func pickWeighted(wcs []resources.WeightedCluster) string {
	var total uint64
	for _, wc := range wcs {
		total += uint64(wc.Weight)
	}
	n := rand.Uint64N(total)
	for _, wc := range wcs {
		if n < uint64(wc.Weight) {
			return wc.Name
		}
		n -= uint64(wc.Weight)
	}
	return wcs[len(wcs)-1].Name
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
		return "safe_regex:" + strconv.Quote(r.Raw.GetMatch().GetSafeRegex().GetRegex())
	}
	return "prefix:" + strconv.Quote(r.Prefix)
}
