package authz_test

import (
	"net/netip"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/dataplane/authz"
	"github.com/goxds/xds/resources"
)

// chain is a valid server filter chain: a connection manager with an
// inline route configuration and the router.
func chain(name string, m *listenerv3.FilterChainMatch) *listenerv3.FilterChain {
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
			}}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: toAny(&routerv3.Router{})},
		}},
	}
	return &listenerv3.FilterChain{Name: name, FilterChainMatch: m, Filters: []*listenerv3.Filter{
		{Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: toAny(hcm)}},
	}}
}

func cidr(addr string, bits uint32) *corev3.CidrRange {
	return &corev3.CidrRange{AddressPrefix: addr, PrefixLen: wrapperspb.UInt32(bits)}
}

func serverListener(chains ...*listenerv3.FilterChain) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name: "grpc/server?xds.resource.listening_address=0.0.0.0:8080",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
		}}},
		FilterChains: chains,
	}
}

// decodeListener decodes m as the xDS client does.
func decodeListener(m *listenerv3.Listener) (*resources.Listener, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	_, l, err := resources.ListenerType.DecodeTyped(&anypb.Any{TypeUrl: resources.ListenerTypeURL, Value: b})
	return l, err
}

func TestFindFilterChain(t *testing.T) {
	m := serverListener(
		chain("any", nil),
		chain("dst-10/8", &listenerv3.FilterChainMatch{PrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 8)}}),
		chain("dst-10.1/16", &listenerv3.FilterChainMatch{PrefixRanges: []*corev3.CidrRange{cidr("10.1.0.0", 16)}}),
		chain("dst-10.1/16-external", &listenerv3.FilterChainMatch{
			PrefixRanges: []*corev3.CidrRange{cidr("10.1.0.0", 16)}, SourceType: listenerv3.FilterChainMatch_EXTERNAL,
		}),
		chain("dst-10.1/16-external-src", &listenerv3.FilterChainMatch{
			PrefixRanges: []*corev3.CidrRange{cidr("10.1.0.0", 16)}, SourceType: listenerv3.FilterChainMatch_EXTERNAL,
			SourcePrefixRanges: []*corev3.CidrRange{cidr("192.168.0.0", 16)},
		}),
		chain("dst-10.1/16-external-src-port", &listenerv3.FilterChainMatch{
			PrefixRanges: []*corev3.CidrRange{cidr("10.1.0.0", 16)}, SourceType: listenerv3.FilterChainMatch_EXTERNAL,
			SourcePrefixRanges: []*corev3.CidrRange{cidr("192.168.0.0", 16)}, SourcePorts: []uint32{7},
		}),
		chain("loopback", &listenerv3.FilterChainMatch{
			PrefixRanges: []*corev3.CidrRange{cidr("127.0.0.0", 8)}, SourceType: listenerv3.FilterChainMatch_SAME_IP_OR_LOOPBACK,
		}),
		chain("only-from-1.2.3.4", &listenerv3.FilterChainMatch{
			PrefixRanges:       []*corev3.CidrRange{cidr("172.16.0.0", 12)},
			SourcePrefixRanges: []*corev3.CidrRange{cidr("1.2.3.4", 32)},
		}),
	)
	m.DefaultFilterChain = chain("default", nil)
	l, err := decodeListener(m)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ local, remote, want string }{
		{"8.8.8.8:1", "9.9.9.9:1", "any"},
		{"10.2.0.1:1", "9.9.9.9:1", "dst-10/8"},
		{"10.1.0.1:1", "10.1.0.1:5", "dst-10.1/16"}, // same IP: not external
		{"10.1.0.1:1", "9.9.9.9:1", "dst-10.1/16-external"},
		{"10.1.0.1:1", "192.168.1.1:1", "dst-10.1/16-external-src"},
		{"10.1.0.1:1", "192.168.1.1:7", "dst-10.1/16-external-src-port"},
		{"[::ffff:10.1.0.1]:1", "[::ffff:192.168.1.1]:7", "dst-10.1/16-external-src-port"},
		{"127.0.0.1:1", "127.0.0.1:9", "loopback"},
		{"127.0.0.1:1", "8.8.8.8:9", "default"}, // the most specific destination has no chain for it
		{"172.16.0.1:1", "1.2.3.4:9", "only-from-1.2.3.4"},
		{"172.16.0.1:1", "1.2.3.5:9", "default"},
	}
	for _, tt := range tests {
		fc := authz.FindFilterChain(l.Server, netip.MustParseAddrPort(tt.local), netip.MustParseAddrPort(tt.remote))
		if fc == nil || fc.Name != tt.want {
			t.Errorf("FindFilterChain(%s, %s) = %+v, want %q", tt.local, tt.remote, fc, tt.want)
		}
	}

	// Without a default chain, a connection nothing matches gets none.
	m.DefaultFilterChain = nil
	l, err = decodeListener(m)
	if err != nil {
		t.Fatal(err)
	}
	if fc := authz.FindFilterChain(l.Server, netip.MustParseAddrPort("172.16.0.1:1"), netip.MustParseAddrPort("1.2.3.5:9")); fc != nil {
		t.Errorf("FindFilterChain matched %q, want none", fc.Name)
	}
}

// FuzzFindFilterChain looks up connections in server Listeners a
// management server could send: the lookup never panics, and what it
// returns is the default chain or a chain of the Listener whose match the
// connection meets.
func FuzzFindFilterChain(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte, local, remote string) {
		_, l, err := resources.ListenerType.DecodeTyped(&anypb.Any{TypeUrl: resources.ListenerTypeURL, Value: b})
		if err != nil || l.Server == nil {
			return
		}
		la, err := netip.ParseAddrPort(local)
		if err != nil {
			return
		}
		ra, err := netip.ParseAddrPort(remote)
		if err != nil {
			return
		}
		s := l.Server
		fc := authz.FindFilterChain(s, la, ra)
		if fc == nil || fc == s.DefaultFilterChain {
			if fc == nil && s.DefaultFilterChain != nil {
				t.Fatal("no chain, though the Listener has a default")
			}
			return
		}
		for _, e := range s.Entries {
			if e.Chain == fc && meets(e, la, ra) {
				return
			}
		}
		t.Fatalf("chain %q for %v from %v: the connection meets none of its entries", fc.Name, la, ra)
	})
}

// meets reports whether a connection meets every part of an entry's match.
func meets(e resources.FilterChainEntry, local, remote netip.AddrPort) bool {
	la, ra := local.Addr().Unmap(), remote.Addr().Unmap()
	if e.Destination.IsValid() && !e.Destination.Contains(la) || e.Source.IsValid() && !e.Source.Contains(ra) {
		return false
	}
	if e.SourcePort != 0 && e.SourcePort != uint32(remote.Port()) {
		return false
	}
	local2 := ra.IsLoopback() || ra == la
	switch e.SourceType {
	case resources.SourceSameIPOrLoopback:
		return local2
	case resources.SourceExternal:
		return !local2
	}
	return true
}
