package httpxds

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/goxds/xds/resources"
)

// FuzzRedirectTarget builds redirects for Hosts and paths a client could
// send: never a panic, the Location always starts with the scheme and
// "://", a stripped host is a prefix of the Host, a matching strip
// keeps a Host whose port is not the listener's, and
// strip_trailing_host_dot takes at most a dot off the name.
func FuzzRedirectTarget(f *testing.F) {
	for _, s := range [][3]string{
		{"svc.test:80", "/old/x", "a=1"},
		{"[::1]:443", "/", ""},
		{"[::1]", "/old/", "q"},
		{"a:b:c", "/x", ""},
		{":", "", ""},
		{"", "/old", "x=%zz"},
	} {
		f.Add(s[0], s[1], s[2], true)
	}
	d := &redirect{status: 301, scheme: "https", prefix: new(string)}
	*d.prefix = "/new/"
	rt := &resources.Route{PathMatch: resources.PathMatchPrefix, Prefix: "/old"}
	f.Fuzz(func(t *testing.T, host, path, query string, strip bool) {
		for _, mode := range []resources.HostPortStrip{resources.HostPortStripMatching, resources.HostPortStripAny} {
			h := rewriteHost(host, mode, false, 80)
			if !strings.HasPrefix(host, h) {
				t.Errorf("rewriteHost(%q, %v) = %q, not a prefix", host, mode, h)
			}
			// The port is compared as a number, as Envoy does: "080" is 80.
			if _, p, ok := splitPort(host); mode == resources.HostPortStripMatching && ok && atoi(p) != 80 && h != host {
				t.Errorf("rewriteHost(%q, matching 80) = %q", host, h)
			}
			// strip_trailing_host_dot drops at most one byte, a dot, and
			// only from the name.
			if hd := rewriteHost(host, mode, true, 80); hd != h && !oneDotLess(h, hd) {
				t.Errorf("rewriteHost(%q, %v, dot) = %q, without the dot %q", host, mode, hd, h)
			}
		}
		if !strings.HasPrefix(path, "/old") {
			return // the route matched it
		}
		d.stripQuery = strip
		r := &http.Request{Host: host, URL: &url.URL{Path: path, RawQuery: query}}
		if loc := d.target(r, rt, path); !strings.HasPrefix(loc, "https://") {
			t.Errorf("target = %q", loc)
		}
	})
}

// atoi is p's value, -1 if it is not a number.
func atoi(p string) int {
	n, err := strconv.Atoi(p)
	if err != nil {
		return -1
	}
	return n
}

// oneDotLess reports whether b is a with one of its dots taken out.
func oneDotLess(a, b string) bool {
	for i := range len(a) {
		if a[i] == '.' && a[:i]+a[i+1:] == b {
			return true
		}
	}
	return false
}
