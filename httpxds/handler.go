package httpxds

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/goxds/xds/dataplane/authz"
	"github.com/goxds/xds/dataplane/httppath"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/internal/serverconn"
	"github.com/goxds/xds/internal/serverlds"
	"github.com/goxds/xds/resources"
)

// ServeHTTP applies the connection's filter chain to one request, in
// Envoy's order: the path normalized (dataplane/httppath), the virtual
// host for its Host, the first route that matches, the chain's HTTP
// filters with the route's and virtual host's overrides (RBAC, fault
// injection), then the route's action: the handler for
// non_forwarding_action, the configured answer for direct_response.
func (g *generation) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l := g.l
	cc, _ := r.Context().Value(chainKey{}).(*chainConn)
	if cc == nil {
		// Every connection comes through Deliver, which sets it.
		http.Error(w, "httpxds: request on a connection without a filter chain", http.StatusInternalServerError)
		return
	}
	cc.served()
	cs := cc.cs
	routes := l.core.Routes()
	rc, err := routes.Config(cs.fc)
	if err != nil {
		failf(w, http.StatusServiceUnavailable, "listener %q, filter chain %q: %v", l.core.Name(), cs.fc.Name, err)
		return
	}
	if cs.strip != resources.HostPortKeep || cs.stripDot {
		if h := rewriteHost(r.Host, cs.strip, cs.stripDot, cs.port); h != r.Host {
			// As Envoy, before routing and filters, and the handler
			// is served the host they saw.
			r2 := new(http.Request)
			*r2 = *r
			r2.Host = h
			r = r2
		}
	}
	raw := rawPath(r)
	path, act, err := httppath.Normalize(raw, cs.norm)
	if err != nil {
		// Envoy answers 400 to a path that normalize_path cannot
		// normalize, and to REJECT_REQUEST.
		failf(w, http.StatusBadRequest, "listener %q: %v", l.core.Name(), err)
		return
	}
	if act == httppath.Redirect {
		// UNESCAPE_AND_REDIRECT: the client asks again for the unescaped
		// path, which then goes through routing and RBAC itself.
		loc := path
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	vh := resources.FindVirtualHost(rc.VirtualHosts, r.Host)
	if vh == nil {
		// Envoy answers 404 when no virtual host matches.
		failf(w, http.StatusNotFound, "no virtual host for host %q in route configuration %q (listener %q)", r.Host, rc.Name, l.core.Name())
		return
	}
	req := &request{r: r, path: path}
	rt := route.MatchHTTP(vh.Routes, path, req, queryView{req})
	if rt == nil {
		// Envoy answers 404 when no route matches.
		failf(w, http.StatusNotFound, "no route for host %q path %q in route configuration %q (virtual host %q, listener %q)",
			r.Host, path, rc.Name, vh.Name, l.core.Name())
		return
	}
	w, ok := g.runFilters(w, req, cs.fc, vh, rt, rc)
	if !ok {
		return
	}
	switch rt.Action {
	case resources.RouteActionNonForwarding:
		r = withPath(r, raw, path)
		m := extrasOf(routes, rt, vh, rc).mut
		if len(m.request) > 0 {
			apply(m.request, r.Header)
		}
		if len(m.response) > 0 {
			w = &mutatingWriter{ResponseWriter: w, steps: m.response}
		}
		l.s.h.ServeHTTP(w, r)
	case resources.RouteActionDirectResponse:
		x := extrasOf(routes, rt, vh, rc)
		apply(x.mut.response, w.Header())
		directResponse(w, x.direct, rt, rc)
	case resources.RouteActionRedirect:
		// Not forwarding: Envoy's router answers it itself.
		x := extrasOf(routes, rt, vh, rc)
		apply(x.mut.response, w.Header())
		answerRedirect(w, r, x.redirect, rt, rc, path)
	default:
		// gRFC A36: a server serves only the routes that say so; gRPC
		// fails the RPC UNAVAILABLE, whose HTTP status is 503. This
		// server forwards nothing, so a route to a cluster or an action
		// it does not know is a configuration it cannot follow.
		failf(w, http.StatusServiceUnavailable, "route %s of route configuration %q (host %q, path %q) has action %v; this server serves only non_forwarding_action, direct_response and redirect routes",
			route.Describe(rt), rc.Name, r.Host, path, rt.Action)
	}
}

// failf answers a request the configuration refuses, with a message that
// names what refused it.
func failf(w http.ResponseWriter, status int, format string, args ...any) {
	http.Error(w, "httpxds: "+fmt.Sprintf(format, args...), status)
}

// rawPath is the request target's path as received, percent-encoded,
// without the query: what Envoy's :path holds.
func rawPath(r *http.Request) string {
	p := r.RequestURI
	if strings.HasPrefix(p, "/") {
		if i := strings.IndexByte(p, '?'); i >= 0 {
			p = p[:i]
		}
		return p
	}
	// The absolute form ("http://host/path") or "*".
	if p == "*" {
		return p
	}
	return r.URL.EscapedPath()
}

// rewriteHost is host as a connection manager leaves it before routing:
// without its port under strip_any_host_port, or under
// strip_matching_host_port when the port is listenerPort; and with
// strip_trailing_host_dot (dot), without a trailing dot of its name, the
// port kept ("example.com.:80" is "example.com:80"), as Envoy's
// HttpConnectionManager documents the three fields. A name that is only
// a dot is kept.
func rewriteHost(host string, mode resources.HostPortStrip, dot bool, listenerPort int) string {
	name, port, hasPort := splitPort(host)
	if hasPort && mode != resources.HostPortKeep {
		if p, err := strconv.Atoi(port); mode == resources.HostPortStripAny || err == nil && p == listenerPort {
			host, hasPort = name, false
		}
	}
	if !dot || len(name) < 2 || name[len(name)-1] != '.' {
		return host
	}
	name = name[:len(name)-1]
	if hasPort {
		return name + ":" + port
	}
	return name
}

// querySuffix is the request target's query with its "?", "" without
// one: what follows the path in Envoy's :path ("/a?" keeps its "?").
func querySuffix(r *http.Request) string {
	if r.URL.RawQuery == "" && !r.URL.ForceQuery {
		return ""
	}
	return "?" + r.URL.RawQuery
}

// withPath is r with the normalized path, as Envoy forwards the normalized
// :path upstream: what routing and RBAC judged is what the handler serves.
func withPath(r *http.Request, raw, path string) *http.Request {
	if path == raw {
		return r
	}
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	dec, err := url.PathUnescape(path)
	if err != nil {
		dec = path // Normalize returns valid escapes only
	}
	u.Path, u.RawPath = dec, path
	r2.URL = &u
	r2.RequestURI = u.RequestURI()
	return r2
}

// runFilters runs the chain's HTTP filters, each with its most specific
// override (route, then virtual host). It answers the request itself and
// returns false when a filter stops it; else the writer the response
// goes through (ext_authz may add response headers). A filter this
// server has no code for fails the request rather than being skipped (it
// may be a security filter), unless it is optional.
func (g *generation) runFilters(w http.ResponseWriter, req *request, fc *resources.FilterChain, vh *resources.VirtualHost, rt *resources.Route, rc *resources.RouteConfig) (http.ResponseWriter, bool) {
	for i := range fc.HTTPFilters {
		f := &fc.HTTPFilters[i]
		cfg, on := f.EffectiveConfig(rt.FilterOverrides, vh.FilterOverrides)
		if !on {
			continue
		}
		switch c := cfg.(type) {
		case *resources.RouterConfig:
			// Terminal: the route's action follows.
		case *resources.RBACConfig:
			if c.Rules == nil {
				continue
			}
			if ok, policy := authz.Authorize(c.Rules, req.authz()); !ok {
				// Envoy's RBAC filter answers 403 "RBAC: access denied"
				// and no more: the refused caller learns nothing of the
				// policies. Why is the server's to log.
				why := "matched no allow policy"
				if policy != "" {
					why = "matched deny policy " + strconv.Quote(policy)
				}
				g.l.s.logger.Debug("httpxds: RBAC: access denied", "method", req.r.Method, "path", req.path,
					"why", why, "filter", f.Name, "route_configuration", rc.Name)
				failf(w, http.StatusForbidden, "RBAC: access denied")
				return w, false
			}
		case *resources.FaultConfig:
			if !g.fault(w, req, c) {
				return w, false
			}
		case *resources.ExtAuthzConfig, *resources.ExtAuthzPerRouteConfig:
			var ok bool
			if w, ok = g.extAuthz(w, req, f, cfg, rc); !ok {
				return w, false
			}
		default:
			// A filter the registry knows but this server has no code
			// for (ext_proc, which xdsserver runs): as the HTTP client
			// treats one it cannot run (dataplane/httpfilter), Envoy's
			// is_optional says whether it may be skipped.
			if f.IsOptional {
				continue
			}
			failf(w, http.StatusServiceUnavailable, "listener %q: HTTP filter %q of type %s cannot run on an HTTP server", g.l.core.Name(), f.Name, f.TypeURL)
			return w, false
		}
	}
	return w, true
}

// fault applies the fault injection filter (Envoy's HTTPFault, as
// dataplane/route draws it): a delay, then maybe an abort with the
// configured or header-given HTTP status and Envoy's body "fault filter
// abort". An abort that gives a gRPC status only (grpc_status, or the
// x-envoy-fault-abort-grpc-request header) is answered as a gRPC error
// without a body frame would be: 200 with the grpc-status header, the
// same body.
func (g *generation) fault(w http.ResponseWriter, req *request, cfg *resources.FaultConfig) bool {
	a, aborted, err := g.l.s.faults.Inject(req.r.Context(), cfg, req)
	if err != nil {
		return false // the client went away during the delay
	}
	if !aborted {
		return true
	}
	status := a.HTTPStatus
	if status == 0 && a.Config != nil {
		status = int(a.Config.HTTPStatus)
	}
	if status == 0 {
		code := a.GRPCStatus
		if a.Config != nil {
			code = int(a.Config.Code)
		}
		w.Header().Set("grpc-status", strconv.Itoa(code))
		status = http.StatusOK
	}
	http.Error(w, "fault filter abort", status)
	return false
}

// request is one request as the data plane sees it: routing's header and
// query views, RBAC's request.
type request struct {
	r     *http.Request
	path  string // normalized
	query url.Values
	parse bool
}

// Get implements route.Headers: Envoy's pseudo-headers, else the values
// joined with ",".
func (q *request) Get(name string) (string, bool) {
	switch name {
	case ":method":
		return q.r.Method, true
	case ":authority", "host":
		return q.r.Host, true
	case ":path":
		if qs := querySuffix(q.r); qs != "" {
			return q.path + qs, true
		}
		return q.path, true
	case ":scheme":
		if q.r.TLS != nil {
			return "https", true
		}
		return "http", true
	}
	return headerValue(q.r.Header, name)
}

// Last implements route.Headers.
func (q *request) Last(name string) (string, bool) { return lastHeader(q.r.Header, name) }

// headerValue is route.Headers' Get of h: a repeated header's values
// joined with commas, as Envoy's header matchers see them.
func headerValue(h http.Header, name string) (string, bool) {
	vs := h[textproto.CanonicalMIMEHeaderKey(name)]
	return route.JoinValues(vs)
}

// lastHeader is route.Headers' Last of h: a repeated header's last value.
func lastHeader(h http.Header, name string) (string, bool) {
	vs := h[textproto.CanonicalMIMEHeaderKey(name)]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// queryView is a request's route.Query: the first value of a parameter,
// the query parsed once.
type queryView struct{ *request }

// Get implements route.Query.
func (v queryView) Get(name string) (string, bool) {
	q := v.request
	if !q.parse {
		q.query, _ = url.ParseQuery(q.r.URL.RawQuery)
		q.parse = true
	}
	vs := q.query[name]
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

// authz is the request as RBAC sees it: the normalized path, the headers
// by lower-case name with the Host as :authority, the connection's
// addresses, the client's certificate. Headers are read where they are,
// not copied.
func (q *request) authz() *authz.Request {
	r := q.r
	a := &authz.Request{Method: r.Method, Path: q.path, Query: querySuffix(r), HeaderValues: q.headerValues}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		a.Local, _ = serverconn.AddrPort(la)
	}
	a.Remote, _ = netip.ParseAddrPort(r.RemoteAddr)
	if r.TLS != nil {
		a.TLS, a.PeerCertificates = true, r.TLS.PeerCertificates
		if len(r.TLS.PeerCertificates) > 0 {
			a.Principal = spiffeID(r.TLS.PeerCertificates[0].URIs)
		}
	}
	return a
}

// headerValues is RBAC's view of the headers: net/http keeps the Host
// apart from them, and RBAC's matchers name it :authority or host.
func (q *request) headerValues(name string) []string {
	if name == ":authority" || name == "host" {
		return []string{q.r.Host}
	}
	return q.r.Header[textproto.CanonicalMIMEHeaderKey(name)]
}

// spiffeID is the certificate's SPIFFE ID: its one URI SAN when that is a
// spiffe:// URI, else "".
func spiffeID(uris []*url.URL) string {
	if len(uris) == 1 && uris[0].Scheme == "spiffe" {
		return uris[0].String()
	}
	return ""
}

// directResponse answers as Envoy's direct_response: the status, and the
// body if any with content-type text/plain.
func directResponse(w http.ResponseWriter, d *direct, rt *resources.Route, rc *resources.RouteConfig) {
	if d.err != nil {
		failf(w, http.StatusInternalServerError, "route %s of route configuration %q: direct_response: %v", route.Describe(rt), rc.Name, d.err)
		return
	}
	if d.body != nil {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(d.body)))
	}
	w.WriteHeader(d.status)
	w.Write(d.body)
}

type direct struct {
	status int
	body   []byte
	err    error
}

// routeExtras is what a route's requests need of its protos: its header
// mutations and its direct response or redirect.
type routeExtras struct {
	mut      *mutations
	direct   *direct
	redirect *redirect
}

// extrasOf returns rt's extras, worked out on its first request (Route.Raw
// unmarshals the route anew; a direct response body may come from a file,
// read once as Envoy reads it with the configuration). The cache is
// the Routes' own (serverlds.Routes.Cache), new when the route
// configurations or the Listener version change, so that it keeps no
// route that is gone; a route belongs to one virtual host of one route
// configuration, so it is the key.
func extrasOf(routes *serverlds.Routes, rt *resources.Route, vh *resources.VirtualHost, rc *resources.RouteConfig) *routeExtras {
	cache := &routes.Cache
	if x, ok := cache.Load(rt); ok {
		return x.(*routeExtras)
	}
	x := &routeExtras{mut: mutationsOf(rt, vh, rc)}
	switch rt.Action {
	case resources.RouteActionDirectResponse:
		x.direct = directOf(rt)
	case resources.RouteActionRedirect:
		x.redirect = redirectOf(rt)
	}
	v, _ := cache.LoadOrStore(rt, x)
	return v.(*routeExtras)
}

func directOf(rt *resources.Route) *direct {
	d := &direct{}
	dr := rt.Raw().GetDirectResponse()
	d.status = int(dr.GetStatus())
	if d.status < 100 || d.status > 599 {
		// Envoy's validation: status in [100, 600).
		d.err = fmt.Errorf("status %d is not in [100, 600)", d.status)
	} else if b := dr.GetBody(); b != nil {
		switch {
		case b.GetInlineString() != "":
			d.body = []byte(b.GetInlineString())
		case b.GetInlineBytes() != nil:
			d.body = b.GetInlineBytes()
		case b.GetFilename() != "":
			d.body, d.err = os.ReadFile(b.GetFilename())
		case b.GetEnvironmentVariable() != "":
			d.body = []byte(os.Getenv(b.GetEnvironmentVariable()))
		default:
			d.body = []byte{}
		}
	}
	return d
}
