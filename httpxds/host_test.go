package httpxds_test

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// TestStripHostPort: the connection manager's strip_matching_host_port
// drops the Host's port when it is the listener's, strip_any_host_port
// any port, before the virtual host is chosen, and the handler sees the
// host without it; without either the port is part of the host and
// "svc.test:port" does not match a domain "svc.test". strip_trailing_host_dot
// drops a trailing dot of the name. Envoy's docs:
// https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto
// (strip_matching_host_port, strip_any_host_port, strip_trailing_host_dot) and
// https://www.envoyproxy.io/docs/envoy/latest/faq/debugging/why_is_my_route_not_found
// (host:port matching).
func TestStripHostPortAndDot(t *testing.T) {
	host := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "host %s", r.Host) })
	rc := &routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{
		{Name: "svc", Domains: []string{"svc.test", "[::1]"}, Routes: []*routev3.Route{serveRoute(prefix("/"))}},
	}}
	for _, tc := range []struct {
		name string
		edit func(*hcmv3.HttpConnectionManager)
		// want maps a Host (PORT: the listener's port) to the host the
		// handler sees, "" for a 404 of no virtual host.
		want map[string]string
	}{
		{"unset", nil, map[string]string{
			"svc.test":      "svc.test",
			"svc.test:PORT": "",
			"svc.test.":     "",
		}},
		// strip_trailing_host_dot: "example.com." matches a domain
		// "example.com"; with a port, the dot of the name goes and the
		// port stays ("example.com.:443" is "example.com:443").
		{"strip_trailing_host_dot", func(h *hcmv3.HttpConnectionManager) { h.StripTrailingHostDot = true }, map[string]string{
			"svc.test.": "svc.test",
			"svc.test":  "svc.test",
			"[::1]":     "[::1]",
		}},
		{"strip_trailing_host_dot_and_any_port", func(h *hcmv3.HttpConnectionManager) {
			h.StripTrailingHostDot = true
			h.StripPortMode = &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true}
		}, map[string]string{
			"svc.test.:1":    "svc.test",
			"svc.test.:PORT": "svc.test",
		}},
		{"strip_matching_host_port", func(h *hcmv3.HttpConnectionManager) { h.StripMatchingHostPort = true }, map[string]string{
			"svc.test:PORT": "svc.test",
			"[::1]:PORT":    "[::1]",
			"svc.test:1":    "",
			"svc.test":      "svc.test",
		}},
		{"strip_any_host_port", func(h *hcmv3.HttpConnectionManager) {
			h.StripPortMode = &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true}
		}, map[string]string{
			"svc.test:PORT": "svc.test",
			"svc.test:1":    "svc.test",
			"[::1]:1":       "[::1]",
			"[::1]":         "[::1]",
			"svc.test":      "svc.test",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{handler: host})
			e.serve(e.listener(rc, "", tc.edit))
			for h, want := range tc.want {
				h = replacePort(h, e.port)
				got := e.get("/", "Host: "+h)
				if want == "" {
					e.want(got, http.StatusNotFound, fmt.Sprintf("no virtual host for host %q", h))
				} else {
					e.want(got, http.StatusOK, "host "+want)
				}
			}
		})
	}
}

func replacePort(h string, port uint32) string {
	if n := len(h) - len("PORT"); n > 0 && h[n:] == "PORT" {
		return h[:n] + strconv.Itoa(int(port))
	}
	return h
}

// TestClientStripHostRules: a client Listener's connection manager
// rewrites the request's host as Envoy's does before the virtual host is
// chosen, and the endpoint is sent that host: strip_trailing_host_dot
// makes "svc.test." match a domain "svc.test"; strip_any_host_port drops
// any port; strip_matching_host_port drops the port the URL names (the
// one the Listener is named for). Without them the host as sent must
// match, and a request whose Host matches no domain fails naming it.
// https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto
// (strip_trailing_host_dot, strip_any_host_port, strip_matching_host_port).
func TestClientStripHostRules(t *testing.T) {
	for _, tc := range []struct {
		name      string
		edit      func(*hcmv3.HttpConnectionManager)
		url, host string // the request's URL (of svc.test) and Host
		wantHost  string // what the backend sees; "" for no virtual host
	}{
		{"unset", nil, "svc.test", "svc.test.", ""},
		{"strip_trailing_host_dot", func(h *hcmv3.HttpConnectionManager) { h.StripTrailingHostDot = true }, "svc.test", "svc.test.", "svc.test"},
		{"strip_trailing_host_dot_keeps_port", func(h *hcmv3.HttpConnectionManager) { h.StripTrailingHostDot = true }, "svc.test", "svc.test.:1", ""},
		{"strip_any_host_port", func(h *hcmv3.HttpConnectionManager) {
			h.StripPortMode = &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true}
		}, "svc.test", "svc.test.:1", ""},
		{"strip_any_host_port_and_dot", func(h *hcmv3.HttpConnectionManager) {
			h.StripTrailingHostDot = true
			h.StripPortMode = &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true}
		}, "svc.test", "svc.test.:1", "svc.test"},
		{"strip_matching_host_port", func(h *hcmv3.HttpConnectionManager) { h.StripMatchingHostPort = true }, "svc.test:8080", "svc.test:8080", "svc.test"},
		{"strip_matching_host_port_other_port", func(h *hcmv3.HttpConnectionManager) { h.StripMatchingHostPort = true }, "svc.test:8080", "svc.test:1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCEnv(t, cenvOptions{})
			a := newBackend(t, "a")
			rc := &routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{
				{Name: "svc", Domains: []string{"svc.test"}, Routes: []*routev3.Route{toCluster(prefix("/"), "c", nil)}},
			}}
			res := world(rc, map[string][]*backend{"c": {a}})
			l := testutils.ListenerInlineRoute(tc.url, rc)
			if tc.edit != nil {
				var hcm hcmv3.HttpConnectionManager
				if err := l.GetApiListener().GetApiListener().UnmarshalTo(&hcm); err != nil {
					t.Fatal(err)
				}
				tc.edit(&hcm)
				l.ApiListener.ApiListener = testutils.MarshalAny(&hcm)
			}
			res.Listeners = []*listenerv3.Listener{l}
			e.update(res)
			req, _ := http.NewRequest(http.MethodGet, "http://"+tc.url+"/x", nil)
			req.Host = tc.host
			got, err := e.do(req)
			if tc.wantHost == "" {
				// The error names the host as rewritten: what was matched.
				if !errors.Is(err, watchers.ErrNoVirtualHost) || !strings.Contains(err.Error(), `the authority "svc.test`) {
					t.Fatalf("Host %q: %v, %d %q; want no virtual host, naming the host", tc.host, err, got.status, got.body)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e.want(got, http.StatusOK, "a GET /x  host="+tc.wantHost+" ")
		})
	}
}
