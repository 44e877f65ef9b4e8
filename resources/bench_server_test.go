package resources

import (
	"strconv"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// benchServerListener is a server Listener as a mesh sends it to a gRPC
// server: four filter chains matched on destination and source, each with
// an RBAC filter of ten policies (path, header, principal and address
// rules), so that decoding it measures the RBAC and filter chain
// validation the data plane relies on.
func benchServerListener() *listenerv3.Listener {
	policies := make(map[string]*rbacv3.Policy)
	for i := range 10 {
		policies["policy-"+strconv.Itoa(i)] = &rbacv3.Policy{
			Permissions: []*rbacv3.Permission{pathPerm("/pkg.Svc/M" + strconv.Itoa(i)), {Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 8080}}},
			Principals: []*rbacv3.Principal{
				headerPrincipal("x-user", "user-"+strconv.Itoa(i)),
				{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: exactSM("spiffe://td/ns/a/sa/" + strconv.Itoa(i))}}},
				{Identifier: &rbacv3.Principal_AndIds{AndIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{
					{Identifier: &rbacv3.Principal_SourceIp{SourceIp: cidr("10.0.0.0", 8)}},
					{Identifier: &rbacv3.Principal_NotId{NotId: headerPrincipal("x-blocked", "1")}},
				}}}},
			},
		}
	}
	rbac := toAny(rbacRules(rbacv3.RBAC_ALLOW, policies))
	mk := func(name string, m *listenerv3.FilterChainMatch) *listenerv3.FilterChain {
		h := serverHCM()
		h.HttpFilters = []*hcmv3.HttpFilter{namedFilter("envoy.filters.http.rbac", rbac, false), routerFilter()}
		return &listenerv3.FilterChain{Name: name, FilterChainMatch: m, Filters: []*listenerv3.Filter{hcmFilter("hcm", h)}}
	}
	l := serverListener(
		mk("any", nil),
		mk("dst-10/8", &listenerv3.FilterChainMatch{PrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 8)}}),
		mk("dst-10/8-external", &listenerv3.FilterChainMatch{
			PrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 8)}, SourceType: listenerv3.FilterChainMatch_EXTERNAL,
			SourcePrefixRanges: []*corev3.CidrRange{cidr("192.168.0.0", 16), cidr("172.16.0.0", 12)}, SourcePorts: []uint32{1, 2, 3},
		}),
		mk("loopback", &listenerv3.FilterChainMatch{SourceType: listenerv3.FilterChainMatch_SAME_IP_OR_LOOPBACK}),
	)
	l.DefaultFilterChain = mk("default", nil)
	return l
}

func BenchmarkDecodeServerListener(b *testing.B) {
	benchDecode(b, ListenerType, toAny(benchServerListener()))
}

// The benchmark's Listener must decode, with every chain and its RBAC
// filter: a benchmark of an error path would measure the wrong thing.
func TestBenchServerListenerDecodes(t *testing.T) {
	_, l, err := decodeMsg(ListenerType, benchServerListener())
	if err != nil {
		t.Fatal(err)
	}
	if s := l.Server; s == nil || len(s.FilterChains) != 4 || s.DefaultFilterChain == nil || len(s.FilterChains[0].HTTPFilters) != 2 {
		t.Fatalf("decoded %+v, want four chains and a default, each with RBAC and the router", l.Server)
	}
}
