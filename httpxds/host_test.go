package httpxds_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// TestStripHostPort: the connection manager's strip_matching_host_port
// drops the Host's port when it is the listener's, strip_any_host_port
// any port, before the virtual host is chosen, and the handler sees the
// host without it; without either the port is part of the host and
// "svc.test:port" does not match a domain "svc.test". Envoy's docs:
// https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto
// (strip_matching_host_port, strip_any_host_port) and
// https://www.envoyproxy.io/docs/envoy/latest/faq/debugging/why_is_my_route_not_found
// (host:port matching).
func TestStripHostPort(t *testing.T) {
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
