package main

import (
	"fmt"
	"maps"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/goxds/xds/testutils"
)

// The resource tree every client under test follows: one listener, one
// route configuration with n routes, n EDS clusters and n
// ClusterLoadAssignments of m endpoints each.
const (
	listenerName = "loadtest"
	routeName    = "loadtest-route"
	nodeID       = "loadtest-node"
	// basePort is the endpoints' port when no backend listens (tree-only
	// runs: nothing connects to them).
	basePort = 10000
)

var (
	ldsURL = resourcev3.ListenerType
	rdsURL = resourcev3.RouteType
	cdsURL = resourcev3.ClusterType
	edsURL = resourcev3.EndpointType
	// typeURLs in the order the tree is followed.
	typeURLs = []string{ldsURL, rdsURL, cdsURL, edsURL}
)

func clusterName(i int) string { return fmt.Sprintf("cluster-%06d", i) }

// endpoints is the ClusterLoadAssignment of cluster i of a world of n
// clusters at update round round: m endpoints on port, each at an address
// of its own (endpointHost) that no other endpoint of the world, at any
// round, has. In channel mode one listener on the wildcard address serves
// them all (Linux routes all of 127.0.0.0/8 to the loopback device), and
// the address a connection arrives at tells the backend which endpoint the
// client meant: so the harness sees, at the server, when a channel
// connects to a new endpoint. Round 0 is the initial world. The first
// healthy endpoints are of UNKNOWN health, as usual; the others UNHEALTHY,
// which gRPC (grpc-go and goxds alike) leaves out of the balancer: no
// connection, no socket. That keeps a channel run within the open-file
// limit (runOnce), at the same decode cost.
func endpoints(n, i, m, round int, port uint32, healthy int) *endpointv3.ClusterLoadAssignment {
	eps := make([]testutils.EndpointSpec, m)
	for p, h := range hostsOf(n, i, m, round) {
		eps[p] = testutils.EndpointSpec{Host: h, Port: port}
		if p >= healthy {
			eps[p].Health = corev3.HealthStatus_UNHEALTHY
		}
	}
	return testutils.Endpoints(clusterName(i), eps)
}

// endpointHost is the k-th endpoint address: 127.a.b.c with a from 1 (so
// that 127.0.0.1, where the management server listens, is never one) and
// c from 1 to 254 (no .0 or .255, which some stacks treat apart). Room for
// 16 million endpoints.
func endpointHost(k int) string {
	c := k%254 + 1
	k /= 254
	return fmt.Sprintf("127.%d.%d.%d", k/256%255+1, k%256, c)
}

// routeConfig has one virtual host with n routes, route i sending the path
// prefix "/svc-i/" to cluster i.
func routeConfig(n int) *routev3.RouteConfiguration {
	rc := testutils.RouteConfig(routeName, "*", clusterName(0))
	vh := rc.VirtualHosts[0]
	vh.Routes = make([]*routev3.Route, n)
	for i := range n {
		vh.Routes[i] = &routev3.Route{
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/svc-" + strconv.Itoa(i) + "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: clusterName(i)},
			}},
		}
	}
	return rc
}

// typeSet is one type of a snapshot: its SotW version, its resources and,
// for delta, the version (hash) of each resource.
type typeSet struct {
	version string
	items   map[string]types.ResourceWithTTL
	hashes  map[string]string // nil unless delta
}

// snapshot is the cache.ResourceSnapshot the go-control-plane snapshot
// cache serves. Unlike cache.Snapshot it keeps each type's version apart
// and its delta versions are computed once per resource change, not once per
// snapshot, so that changing one of 100,000 resources costs the server
// little: the server's own cost is not what the harness measures. It is
// immutable once handed to the cache.
type snapshot struct {
	sets map[string]*typeSet
}

var _ cache.ResourceSnapshot = (*snapshot)(nil)

func (s *snapshot) GetVersion(typeURL string) string {
	if ts := s.sets[typeURL]; ts != nil {
		return ts.version
	}
	return ""
}

func (s *snapshot) GetResourcesAndTTL(typeURL string) map[string]types.ResourceWithTTL {
	if ts := s.sets[typeURL]; ts != nil {
		return ts.items
	}
	return nil
}

func (s *snapshot) GetResources(typeURL string) map[string]types.Resource {
	out := make(map[string]types.Resource)
	for name, r := range s.GetResourcesAndTTL(typeURL) {
		out[name] = r.Resource
	}
	return out
}

func (s *snapshot) ConstructVersionMap() error { return nil } // built eagerly

func (s *snapshot) GetVersionMap(typeURL string) map[string]string {
	if ts := s.sets[typeURL]; ts != nil {
		return ts.hashes
	}
	return nil
}

func hashOf(r types.Resource) string {
	b, err := cache.MarshalResource(r)
	if err != nil {
		panic(err) // generated messages always marshal
	}
	return cache.HashResource(b)
}

// world is the resource tree with its current snapshot.
type world struct {
	n, m  int
	delta bool   // keep delta versions
	port  uint32 // every endpoint's port
	// healthy is how many endpoints of each cluster are not UNHEALTHY.
	healthy int
	snap    *snapshot
	// versions counts the changes of each type, the source of SotW versions.
	versions map[string]int
}

func newWorld(n, m int, delta bool, port uint32, healthy int) *world {
	w := &world{n: n, m: m, delta: delta, port: port, healthy: healthy, versions: make(map[string]int)}
	sets := make(map[string]*typeSet)
	add := func(typeURL, name string, r types.Resource) {
		ts := sets[typeURL]
		if ts == nil {
			ts = &typeSet{version: "1", items: make(map[string]types.ResourceWithTTL)}
			if delta {
				ts.hashes = make(map[string]string)
			}
			sets[typeURL] = ts
			w.versions[typeURL] = 1
		}
		ts.items[name] = types.ResourceWithTTL{Resource: r}
		if delta {
			ts.hashes[name] = hashOf(r)
		}
	}
	add(ldsURL, listenerName, testutils.Listener(listenerName, routeName))
	add(rdsURL, routeName, routeConfig(n))
	for i := range n {
		name := clusterName(i)
		add(cdsURL, name, testutils.Cluster(name, ""))
		add(edsURL, name, endpoints(n, i, m, 0, port, healthy))
	}
	w.snap = &snapshot{sets: sets}
	return w
}

// endpointsAt is cluster i's ClusterLoadAssignment at round.
func (w *world) endpointsAt(i, round int) *endpointv3.ClusterLoadAssignment {
	return endpoints(w.n, i, w.m, round, w.port, w.healthy)
}

// withChange returns the world's next snapshot: typeURL gets a new version
// and, if r is not nil, resource name becomes r. A nil r only moves the
// version on, which makes a SotW server resend the type unchanged.
func (w *world) withChange(typeURL, name string, r types.Resource) (next *snapshot, version string) {
	sets := maps.Clone(w.snap.sets)
	old := sets[typeURL]
	w.versions[typeURL]++
	ts := &typeSet{version: strconv.Itoa(w.versions[typeURL]), items: old.items, hashes: old.hashes}
	if r != nil {
		ts.items = maps.Clone(old.items)
		ts.items[name] = types.ResourceWithTTL{Resource: r}
		if w.delta {
			ts.hashes = maps.Clone(old.hashes)
			ts.hashes[name] = hashOf(r)
		}
	}
	sets[typeURL] = ts
	w.snap = &snapshot{sets: sets}
	return w.snap, ts.version
}
