package httpxds

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/goxds/xds/resources"
)

// FuzzRedirectTarget builds redirects for Hosts and paths a client could
// send: never a panic, the Location always starts with the scheme and
// "://", a stripped host is a prefix of the Host, and a matching strip
// keeps a Host whose port is not the listener's.
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
			h := stripPort(host, mode, 80)
			if !strings.HasPrefix(host, h) {
				t.Errorf("stripPort(%q, %v) = %q, not a prefix", host, mode, h)
			}
			if _, p, ok := splitPort(host); mode == resources.HostPortStripMatching && ok && p != "80" && h != host {
				t.Errorf("stripPort(%q, matching 80) = %q", host, h)
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
