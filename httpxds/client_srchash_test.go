package httpxds_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/goxds/xds/httpxds"
)

// sourceIPPolicy is a connection_properties hash policy with source_ip.
func sourceIPPolicy(terminal bool) *routev3.RouteAction_HashPolicy {
	return &routev3.RouteAction_HashPolicy{Terminal: terminal, PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{
		ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}}
}

// headerPolicy is a header hash policy on name.
func headerPolicy(name string) *routev3.RouteAction_HashPolicy {
	return &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: name}}}
}

// endpointOf sends GETs to url through hc and returns the backend that
// answered (the body's first word), failing unless every one of n
// requests reached the same backend.
func endpointOf(t *testing.T, e *cenv, hc *http.Client, n int, url string, headers ...string) string {
	t.Helper()
	got := ""
	for i := range n {
		req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, "http://"+svcHost+url, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range headers {
			name, value, _ := strings.Cut(h, ":")
			req.Header.Set(name, strings.TrimSpace(value))
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %q, %v", url, resp.StatusCode, b, err)
		}
		name, _, _ := strings.Cut(string(b), " ")
		if i > 0 && name != got {
			t.Fatalf("GET %s %v: request %d reached %s, the ones before %s", url, headers, i, name, got)
		}
		got = name
	}
	return got
}

// ring_hash with a source_ip hash policy (connection_properties): Envoy
// hashes the downstream's address, for an app behind a sidecar its own,
// so all of one client's requests reach one endpoint
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto#envoy-v3-api-msg-config-route-v3-routeaction-hashpolicy-connectionproperties).
// The Transport hashes TransportOptions.SourceAddress as Envoy hashes the
// address's text, which a header policy on that text hashes alike: the
// test learns from the header route which endpoint an address owns, and
// checks that Transports with those addresses reach theirs.
func TestClientRingHashSourceIP(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	bs := []*backend{newBackend(t, "b0"), newBackend(t, "b1"), newBackend(t, "b2"), newBackend(t, "b3")}
	policies := func(ps ...*routev3.RouteAction_HashPolicy) func(*routev3.RouteAction) {
		return func(ra *routev3.RouteAction) { ra.HashPolicy = ps }
	}
	res := world(routes("rc",
		toCluster(prefix("/header"), "c", policies(headerPolicy("x-src"))),
		toCluster(prefix("/source"), "c", policies(sourceIPPolicy(false))),
		// A terminal source_ip ends the list: the header after it
		// changes nothing.
		toCluster(prefix("/terminal"), "c", policies(sourceIPPolicy(true), headerPolicy("x-user"))),
		// Not terminal, the header after it is mixed in.
		toCluster(prefix("/both"), "c", policies(sourceIPPolicy(false), headerPolicy("x-user"))),
	), map[string][]*backend{"c": bs})
	res.Clusters[0].LbPolicy = clusterv3.Cluster_RING_HASH
	e.update(res)

	// Unset: a value of the Transport's own, the same for every request.
	endpointOf(t, e, e.hc, 20, "/source")

	// Two addresses that own different endpoints, by the header route.
	var addrs []netip.Addr
	var want []string
	for i := 1; i <= 64 && len(addrs) < 2; i++ {
		a := netip.AddrFrom4([4]byte{10, 1, 0, byte(i)})
		ep := endpointOf(t, e, e.hc, 1, "/header", "X-Src: "+a.String())
		if len(want) == 0 || want[0] != ep {
			addrs, want = append(addrs, a), append(want, ep)
		}
	}
	if len(addrs) < 2 {
		t.Fatalf("64 addresses all hash to endpoint %s", want[0])
	}
	for i, a := range addrs {
		tr, err := httpxds.NewTransport(httpxds.TransportOptions{Bootstrap: e.cfg, ClientOptions: quietClient,
			Logger: slog.New(slog.DiscardHandler), SourceAddress: a})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		hc := &http.Client{Transport: tr}
		if got := endpointOf(t, e, hc, 5, "/source"); got != want[i] {
			t.Errorf("SourceAddress %v: requests reached %s, want %s (where a header policy sends %q)", a, got, want[i], a)
		}
		for k := range 10 {
			user := fmt.Sprintf("X-User: user-%d", k)
			if got := endpointOf(t, e, hc, 1, "/terminal", user); got != want[i] {
				t.Errorf("SourceAddress %v, terminal source_ip then %s: reached %s, want %s", a, user, got, want[i])
			}
		}
	}
	// Not terminal, the header's values spread the requests again.
	seen := map[string]bool{}
	for k := range 20 {
		seen[endpointOf(t, e, e.hc, 1, "/both", fmt.Sprintf("X-User: user-%d", k))] = true
	}
	if len(seen) < 2 {
		t.Errorf("source_ip then a header, not terminal: 20 header values all reached %v", seen)
	}
}
