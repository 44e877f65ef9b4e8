package httpxds

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/resources"
)

// redirect is a route's RedirectAction, read once from its proto (as
// direct_response is): a redirect is answered by the server itself, as
// Envoy's router answers it, so a server can follow it.
type redirect struct {
	status int
	scheme string // "" keeps the request's
	host   string // "" keeps the request's
	port   string // "" keeps the request's port (but see target)

	pathRedirect string // replaces the path when set
	prefix       *string
	regex        *regexp.Regexp
	substitution string
	stripQuery   bool

	err error
}

// redirectStatus maps RedirectResponseCode to its HTTP status.
var redirectStatus = map[routev3.RedirectAction_RedirectResponseCode]int{
	routev3.RedirectAction_MOVED_PERMANENTLY:  http.StatusMovedPermanently,
	routev3.RedirectAction_FOUND:              http.StatusFound,
	routev3.RedirectAction_SEE_OTHER:          http.StatusSeeOther,
	routev3.RedirectAction_TEMPORARY_REDIRECT: http.StatusTemporaryRedirect,
	routev3.RedirectAction_PERMANENT_REDIRECT: http.StatusPermanentRedirect,
}

func redirectOf(rt *resources.Route) *redirect {
	ra := rt.Raw().GetRedirect()
	d := &redirect{host: ra.GetHostRedirect(), stripQuery: ra.GetStripQuery()}
	var ok bool
	if d.status, ok = redirectStatus[ra.GetResponseCode()]; !ok {
		d.err = fmt.Errorf("response_code: unknown value %d", int32(ra.GetResponseCode()))
		return d
	}
	switch s := ra.GetSchemeRewriteSpecifier().(type) {
	case *routev3.RedirectAction_HttpsRedirect:
		if s.HttpsRedirect {
			d.scheme = "https"
		}
	case *routev3.RedirectAction_SchemeRedirect:
		d.scheme = strings.ToLower(s.SchemeRedirect)
	}
	if p := ra.GetPortRedirect(); p != 0 {
		if p > 65535 {
			d.err = fmt.Errorf("port_redirect: %d is not a port", p)
			return d
		}
		d.port = strconv.Itoa(int(p))
	}
	switch p := ra.GetPathRewriteSpecifier().(type) {
	case nil:
	case *routev3.RedirectAction_PathRedirect:
		d.pathRedirect = p.PathRedirect
	case *routev3.RedirectAction_PrefixRewrite:
		d.prefix = &p.PrefixRewrite
	case *routev3.RedirectAction_RegexRewrite:
		re, err := regexp.Compile(p.RegexRewrite.GetPattern().GetRegex())
		if err != nil {
			d.err = fmt.Errorf("regex_rewrite.pattern: %w", err)
			return d
		}
		d.regex, d.substitution = re, p.RegexRewrite.GetSubstitution()
	default:
		d.err = fmt.Errorf("path rewrite %T is not supported", p)
	}
	for _, s := range []string{d.host, d.pathRedirect, d.substitution, d.scheme} {
		if strings.ContainsAny(s, "\r\n\x00") {
			d.err = errors.New("a control character in the redirect's target")
		}
	}
	if d.prefix != nil && strings.ContainsAny(*d.prefix, "\r\n\x00") {
		d.err = errors.New("a control character in prefix_rewrite")
	}
	return d
}

// target is the Location of a request redirected by d, as Envoy's router
// builds it: the scheme, host, port and path the action sets, each else
// the request's, and the query unless strip_query (or a path_redirect
// with a query of its own) drops it. When the scheme changes, the
// request's port is dropped if it was its scheme's default (":80" of
// http, ":443" of https); a port_redirect replaces it.
func (d *redirect) target(r *http.Request, rt *resources.Route, path string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := d.host
	if host == "" {
		host = r.Host
		if h, p, ok := splitPort(host); ok {
			changed := d.scheme != "" && d.scheme != scheme
			if d.port != "" || changed && (scheme == "http" && p == "80" || scheme == "https" && p == "443") {
				host = h
			}
		}
	}
	if d.port != "" {
		host += ":" + d.port
	}
	if d.scheme != "" {
		scheme = d.scheme
	}
	query := querySuffix(r)
	if d.stripQuery {
		query = ""
	}
	switch {
	case d.pathRedirect != "":
		path = d.pathRedirect
		if strings.Contains(path, "?") {
			query = ""
		}
	case d.prefix != nil:
		// The matched prefix (or the whole path, for a path or regex
		// match) is swapped for prefix_rewrite.
		n := len(path)
		if rt.PathMatch == resources.PathMatchPrefix {
			// The match folds ASCII only, so the prefix's length is
			// the matched part's; min keeps a slip from panicking.
			n = min(len(rt.Prefix), n)
		}
		path = *d.prefix + path[n:]
	case d.regex != nil:
		path = route.RegexSubstitute(d.regex, path, d.substitution)
	}
	return scheme + "://" + host + path + query
}

// splitPort splits host's port off: what follows the last ':', or the
// "]:" of an IPv6 literal.
func splitPort(host string) (h, port string, ok bool) {
	var i int
	if strings.HasPrefix(host, "[") {
		if i = strings.LastIndex(host, "]:"); i >= 0 {
			i++
		}
	} else {
		i = strings.LastIndexByte(host, ':')
	}
	if i < 0 {
		return host, "", false
	}
	return host[:i], host[i+1:], true
}

// answerRedirect answers a redirect route: its status and Location, no
// body, as Envoy's router does.
func answerRedirect(w http.ResponseWriter, r *http.Request, d *redirect, rt *resources.Route, rc *resources.RouteConfig, path string) {
	if d.err != nil {
		failf(w, http.StatusInternalServerError, "route %s of route configuration %q: redirect: %v", route.Describe(rt), rc.Name, d.err)
		return
	}
	w.Header().Set("Location", d.target(r, rt, path))
	w.WriteHeader(d.status)
}
