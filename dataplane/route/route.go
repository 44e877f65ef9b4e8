package route

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/goxds/xds/resources"
)

// Headers is a request's headers as routing sees them. The adapter decides
// what a request shows: gRPC's view (GRPCHeaders) hides binary ("-bin")
// headers and shows content-type as "application/grpc".
type Headers interface {
	// Get returns the value of header name (lower case): every value
	// joined with ",", and whether the request has it.
	Get(name string) (string, bool)
	// Last returns the last value of header name, and whether the request
	// has it: what fault injection's control headers read.
	Last(name string) (string, bool)
}

// JoinValues is a header's values as Headers.Get gives them: joined with
// ",", and whether there was any.
func JoinValues(vs []string) (string, bool) {
	switch len(vs) {
	case 0:
		return "", false
	case 1:
		return vs[0], true
	}
	return strings.Join(vs, ","), true
}

// Request is one request to route.
type Request struct {
	// Path is the request's path: "/service/method" for gRPC.
	Path string
	// Headers are its headers; nil reads as none.
	Headers Headers
	// ChannelID is what the channel_id hash policy hashes (gRPC: the
	// channel's random identity).
	ChannelID uint64
}

// header reads a header of req, none when req has no header view.
func (req *Request) header(name string) (string, bool) {
	if req.Headers == nil {
		return "", false
	}
	return req.Headers.Get(name)
}

// ErrorKind says why a request cannot be routed.
type ErrorKind int

const (
	// NoRoute: no route of the virtual host matches the request.
	NoRoute ErrorKind = iota + 1
	// NotForwarding: the route that matched does not forward to a
	// cluster (a redirect, a direct response, non_forwarding_action).
	NotForwarding
	// NoCluster: the route names no cluster, which validation does not
	// let through.
	NoCluster
	// ClusterNotConfigured: the cluster chosen is not in the
	// configuration the caller has.
	ClusterNotConfigured
)

// Error is why a request cannot be routed.
type Error struct {
	Kind ErrorKind
	// Route is the route that matched; nil for NoRoute.
	Route *resources.Route
	// Cluster is the cluster of ClusterNotConfigured.
	Cluster string
}

// Error says why the request goes to no cluster.
func (e *Error) Error() string {
	switch e.Kind {
	case NoRoute:
		return "no route matches the request"
	case NotForwarding:
		return "the request matched route " + Describe(e.Route) + ", whose action " + e.Route.Action.String() + " does not forward it"
	case NoCluster:
		return "the request matched route " + Describe(e.Route) + ", which names no cluster"
	case ClusterNotConfigured:
		return "route " + Describe(e.Route) + " names cluster " + strconv.Quote(e.Cluster) + ", which is not configured"
	}
	return "route.Error(" + strconv.Itoa(int(e.Kind)) + ")"
}

// Describe names a route in messages: by its name, else by its path
// matcher.
func Describe(r *resources.Route) string {
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

// Match returns the first of routes that matches req, or nil.
func Match(routes []*resources.Route, req *Request) *resources.Route {
	for _, r := range routes {
		if r.MatchGRPC(req.Path, req.header) {
			return r
		}
	}
	return nil
}

// NeedsHeaders reports whether some route matches headers or hashes them:
// else a request's headers need not be read to route it.
func NeedsHeaders(routes []*resources.Route) bool {
	for _, r := range routes {
		if len(r.Headers) > 0 || len(r.HashPolicies) > 0 {
			return true
		}
	}
	return false
}

// PickWeighted returns the index of a cluster drawn at random in
// proportion to the weights, which validation keeps above 0 in sum.
func PickWeighted(wcs []resources.WeightedCluster) int {
	var total uint64
	for _, wc := range wcs {
		total += uint64(wc.Weight)
	}
	if total == 0 {
		return 0
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

// Decision is what a Table chose for one request.
type Decision struct {
	// Route is the route that matched.
	Route *resources.Route
	// Cluster is the cluster chosen; "" when Plugin picks it.
	Cluster string
	// Plugin is the route's cluster specifier plugin, which picks the
	// cluster of each request (the adapter runs it); "" if none.
	Plugin string
	// WeightedCluster is the index of the weighted cluster drawn, -1 if
	// the route has none.
	WeightedCluster int
	// Hash is the request's hash (ring_hash).
	Hash uint64
	// Retry is the retry policy, nil for none.
	Retry *RetryPolicy
	// Filters are the HTTP filters to run, in order, with their
	// configurations for this request; shared, not to be modified.
	Filters []FilterConfig
}

// Options are what a Table needs of its adapter.
type Options struct {
	// RetryOn maps the retry_on conditions the adapter retries on to the
	// bit it tests in RetryPolicy.On (0 to 63); conditions not in it are
	// ignored, and a policy with none of them is no policy.
	RetryOn map[string]uint
	// HTTP says the adapter is an HTTP client: the policy's conditions
	// are Envoy's for HTTP (x-envoy-retry-on; RetryOn is not read), and
	// it keeps what only HTTP reads (RetryPolicy.HTTP).
	HTTP bool
}

// Table routes the requests of one configuration: a virtual host and the
// listener it came from. It is immutable but for its caches, and safe for
// concurrent use.
type Table struct {
	vh      *resources.VirtualHost
	l       *resources.Listener
	routes  []*resources.Route
	filters []chainFilter
	opts    Options
	// vhRetry is the virtual host's retry policy, parsed.
	vhRetry *RetryPolicy
	// policies are each route's parsed policy, by route index, made at
	// the route's first request.
	policies []atomic.Pointer[routePolicy]
}

// routePolicy is what a Table works out once per route.
type routePolicy struct {
	retry *RetryPolicy
	// filters[0] are the filters of a request sent to the route's
	// cluster (or plugin); filters[i+1] those of one sent to weighted
	// cluster i.
	filters [][]FilterConfig
}

// NewTable returns the Table of virtual host vh (nil: every request fails
// with NoRoute) of listener l (nil: no HTTP filters).
func NewTable(vh *resources.VirtualHost, l *resources.Listener, opts Options) *Table {
	t := &Table{vh: vh, l: l, opts: opts}
	if vh != nil {
		t.routes = vh.Routes
		t.policies = make([]atomic.Pointer[routePolicy], len(vh.Routes))
		t.vhRetry = parseRetryPolicy(vh.RetryPolicy, opts)
	}
	t.filters = chainOf(l)
	return t
}

// For reports whether t is the table of virtual host vh of listener l: a
// configuration that keeps both (an update of endpoints) keeps its table,
// and the policies it has worked out.
func (t *Table) For(vh *resources.VirtualHost, l *resources.Listener) bool {
	return t.vh == vh && t.l == l
}

// Routes returns the routes of the table's virtual host.
func (t *Table) Routes() []*resources.Route { return t.routes }

// Route routes req: the first route that matches, its cluster (a weighted
// one drawn), the request's hash and its policy, written to d. An error is
// an *Error.
func (t *Table) Route(req *Request, d *Decision) error {
	i, err := selectRoute(t.routes, req, d)
	if err != nil {
		return err
	}
	p := t.policies[i].Load()
	if p == nil {
		p = t.policyOf(d.Route)
		t.policies[i].Store(p)
	}
	d.Retry = p.retry
	if p.filters != nil {
		d.Filters = p.filters[d.WeightedCluster+1]
	}
	return nil
}

// RetryPolicyOf returns the retry policy of r, a route of the table (its
// own, else its virtual host's), worked out once as Route does: for an
// adapter that matches routes itself (MatchHTTP). nil for none, or for a
// route not of the table.
func (t *Table) RetryPolicyOf(r *resources.Route) *RetryPolicy {
	for i, x := range t.routes {
		if x != r {
			continue
		}
		p := t.policies[i].Load()
		if p == nil {
			p = t.policyOf(r)
			t.policies[i].Store(p)
		}
		return p.retry
	}
	return nil
}

// Select is Table.Route without the policy: the route of req among routes,
// its cluster and the request's hash, written to d (its Retry and Filters
// left nil). An error is an *Error.
func Select(routes []*resources.Route, req *Request, d *Decision) error {
	_, err := selectRoute(routes, req, d)
	return err
}

// selectRoute is Select, returning the route's index too.
func selectRoute(routes []*resources.Route, req *Request, d *Decision) (int, error) {
	i := -1
	for j, r := range routes {
		if r.MatchGRPC(req.Path, req.header) {
			i = j
			break
		}
	}
	if i < 0 {
		return -1, &Error{Kind: NoRoute}
	}
	r := routes[i]
	if r.Action != resources.RouteActionRoute {
		return -1, &Error{Kind: NotForwarding, Route: r}
	}
	if r.Cluster == "" && len(r.WeightedClusters) == 0 && r.ClusterSpecifierPlugin == "" {
		return -1, &Error{Kind: NoCluster, Route: r}
	}
	*d = Decision{Route: r, Cluster: r.Cluster, WeightedCluster: -1}
	if r.Cluster == "" {
		if len(r.WeightedClusters) > 0 {
			d.WeightedCluster = PickWeighted(r.WeightedClusters)
			d.Cluster = r.WeightedClusters[d.WeightedCluster].Name
		} else {
			d.Plugin = r.ClusterSpecifierPlugin
		}
	}
	d.Hash = RequestHash(r.HashPolicies, req)
	return i, nil
}

// policyOf works out r's policy: its retry policy (the route's, else the
// virtual host's) and its filters.
func (t *Table) policyOf(r *resources.Route) *routePolicy {
	p := &routePolicy{retry: t.vhRetry}
	if r.RetryPolicy != nil {
		// A route's policy replaces the virtual host's, even one that
		// retries nothing.
		p.retry = parseRetryPolicy(r.RetryPolicy, t.opts)
	}
	if len(t.filters) > 0 {
		p.filters = make([][]FilterConfig, 1+len(r.WeightedClusters))
		p.filters[0] = t.filtersFor(t.vh, r, -1)
		for i := range r.WeightedClusters {
			p.filters[i+1] = t.filtersFor(t.vh, r, i)
		}
	}
	return p
}
