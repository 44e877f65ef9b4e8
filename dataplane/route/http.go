package route

import (
	"math/rand/v2"

	"github.com/goxds/xds/resources"
)

// Query is an HTTP request's query parameters as routing sees them.
type Query interface {
	// Get returns the (decoded) value of parameter name, the first one if
	// it is repeated, and whether the request has it.
	Get(name string) (string, bool)
}

// MatchHTTP returns the first of routes that matches an HTTP request to
// path (normalized, without the query) with headers h and query
// parameters q, or nil. As Envoy's RouteMatch: the path matcher, every
// header matcher, every query parameter matcher (query_parameters: "they
// all must match the path header's query string for a match to occur",
// https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto),
// then the runtime fraction, drawn anew for each route that gets that far.
// A nil q reads as no parameters.
func MatchHTTP(routes []*resources.Route, path string, h Headers, q Query) *resources.Route {
	for _, r := range routes {
		if matchHTTP(r, path, h, q) {
			return r
		}
	}
	return nil
}

func matchHTTP(r *resources.Route, path string, h Headers, q Query) bool {
	if !r.MatchPath(path) {
		return false
	}
	for i := range r.Headers {
		m := &r.Headers[i]
		v, ok := "", false
		if h != nil {
			v, ok = h.Get(m.Name())
		}
		if !m.Match(v, ok) {
			return false
		}
	}
	for _, m := range r.QueryParameters {
		v, ok := "", false
		if q != nil {
			v, ok = q.Get(m.Name())
		}
		if !m.Match(v, ok) {
			return false
		}
	}
	return r.RuntimeFraction < 0 || rand.Int32N(1_000_000) < r.RuntimeFraction
}
