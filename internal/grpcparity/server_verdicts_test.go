package grpcparity

import (
	"context"
	"encoding/json"
	"net"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	exprpb "google.golang.org/genproto/googleapis/api/expr/v1alpha1"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

const serverTemplate = "grpc/server?xds.resource.listening_address=%s"

// serverChain is a filter chain with match m whose connection manager has
// an inline route configuration and the filters given before the router.
func serverChain(m *listenerv3.FilterChainMatch, edit func(*hcmv3.HttpConnectionManager), filters ...*hcmv3.HttpFilter) *listenerv3.FilterChain {
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
			}}}},
		}},
		HttpFilters: append(filters, router()),
	}
	if edit != nil {
		edit(hcm)
	}
	return &listenerv3.FilterChain{FilterChainMatch: m, Filters: []*listenerv3.Filter{{
		Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: toAny(hcm)},
	}}}
}

func rbacFilter(rules *rbacv3.RBAC) *hcmv3.HttpFilter {
	return filter("rbac", toAny(&rbacfilterv3.RBAC{Rules: rules}), false)
}

func anyPolicy(principals ...*rbacv3.Principal) map[string]*rbacv3.Policy {
	if principals == nil {
		principals = []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}}
	}
	return map[string]*rbacv3.Policy{"p": {
		Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_Any{Any: true}}},
		Principals:  principals,
	}}
}

func withTLS(fc *listenerv3.FilterChain, d *tlsv3.DownstreamTlsContext) *listenerv3.FilterChain {
	fc.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: toAny(d)}}
	return fc
}

func providerInstance(name string) *tlsv3.CertificateProviderPluginInstance {
	return &tlsv3.CertificateProviderPluginInstance{InstanceName: name}
}

func validation(vc *tlsv3.CertificateValidationContext) *tlsv3.CommonTlsContext {
	return &tlsv3.CommonTlsContext{
		TlsCertificateProviderInstance: providerInstance("id"),
		ValidationContextType:          &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc},
	}
}

// TestServerListenerVerdicts: gRFC A36's rules on a server's Listener, and
// A41's and A29's on its filters and transport socket, against grpc-go's
// xDS-enabled server.
func TestServerListenerVerdicts(t *testing.T) {
	cidr := func(a string, n uint32) []*corev3.CidrRange {
		return []*corev3.CidrRange{{AddressPrefix: a, PrefixLen: wrapperspb.UInt32(n)}}
	}
	tests := []struct {
		name   string
		chains []*listenerv3.FilterChain
		dflt   *listenerv3.FilterChain
		// differs explains a verdict that is knowingly not grpc-go's.
		differs string
	}{
		{name: "one chain", chains: []*listenerv3.FilterChain{serverChain(nil, nil)}},
		{name: "default chain only", dflt: serverChain(nil, nil)},
		{name: "no chains"},
		{name: "overlapping chains", chains: []*listenerv3.FilterChain{serverChain(nil, nil), serverChain(nil, nil)}},
		{name: "same match, other source ports", chains: []*listenerv3.FilterChain{
			serverChain(&listenerv3.FilterChainMatch{SourcePorts: []uint32{1}}, nil),
			serverChain(&listenerv3.FilterChainMatch{SourcePorts: []uint32{2}}, nil),
		}},
		{name: "raw_buffer beside none", chains: []*listenerv3.FilterChain{
			serverChain(nil, nil), serverChain(&listenerv3.FilterChainMatch{TransportProtocol: "raw_buffer"}, nil),
		}},
		{name: "only unsupported matches", chains: []*listenerv3.FilterChain{
			serverChain(&listenerv3.FilterChainMatch{ServerNames: []string{"a"}}, nil),
			serverChain(&listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(80)}, nil),
		}},
		{name: "dropped chain without filters", chains: []*listenerv3.FilterChain{
			serverChain(nil, nil), {FilterChainMatch: &listenerv3.FilterChainMatch{ApplicationProtocols: []string{"h2"}}},
		}},
		{name: "bad destination prefix", chains: []*listenerv3.FilterChain{serverChain(&listenerv3.FilterChainMatch{PrefixRanges: cidr("10.0.0.256", 8)}, nil)}},
		{name: "source prefix too long", chains: []*listenerv3.FilterChain{serverChain(&listenerv3.FilterChainMatch{SourcePrefixRanges: cidr("10.0.0.0", 40)}, nil)}},
		{name: "chain without filters", chains: []*listenerv3.FilterChain{{}}},
		{name: "rds over self", chains: []*listenerv3.FilterChain{serverChain(nil, func(h *hcmv3.HttpConnectionManager) {
			h.RouteSpecifier = &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
				ConfigSource: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Self{}}, RouteConfigName: "rc",
			}}
		})}},
		{name: "xff_num_trusted_hops", chains: []*listenerv3.FilterChain{serverChain(nil, func(h *hcmv3.HttpConnectionManager) { h.XffNumTrustedHops = 1 })}},
		{name: "client-only filter", chains: []*listenerv3.FilterChain{serverChain(nil, nil, filter("fault", fault, false))}},
		{name: "client-only optional filter", chains: []*listenerv3.FilterChain{serverChain(nil, nil, filter("fault", fault, true))}},
		{name: "rbac", chains: []*listenerv3.FilterChain{serverChain(nil, nil, rbacFilter(&rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: anyPolicy()}))}},
		{name: "rbac without rules", chains: []*listenerv3.FilterChain{serverChain(nil, nil, rbacFilter(nil))}},
		{name: "rbac grpc- header", chains: []*listenerv3.FilterChain{serverChain(nil, nil, rbacFilter(&rbacv3.RBAC{Policies: anyPolicy(
			&rbacv3.Principal{Identifier: &rbacv3.Principal_Header{Header: &routev3.HeaderMatcher{Name: "grpc-x", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}},
		)}))}},
		{name: "rbac condition", chains: []*listenerv3.FilterChain{serverChain(nil, nil, rbacFilter(&rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{"p": {Condition: &exprpb.Expr{}}}}))}},
		{name: "rbac filter_state principal", chains: []*listenerv3.FilterChain{serverChain(nil, nil, rbacFilter(&rbacv3.RBAC{Policies: anyPolicy(
			&rbacv3.Principal{Identifier: &rbacv3.Principal_FilterState{}},
		)}))}},
		{name: "rbac log action", chains: []*listenerv3.FilterChain{serverChain(nil, nil, rbacFilter(&rbacv3.RBAC{Action: rbacv3.RBAC_LOG, Policies: anyPolicy(
			&rbacv3.Principal{Identifier: &rbacv3.Principal_FilterState{}},
		)}))}},
		{name: "tls", chains: []*listenerv3.FilterChain{withTLS(serverChain(nil, nil), &tlsv3.DownstreamTlsContext{
			CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateProviderInstance: providerInstance("id")},
		})}},
		{name: "mtls", chains: []*listenerv3.FilterChain{withTLS(serverChain(nil, nil), &tlsv3.DownstreamTlsContext{
			RequireClientCertificate: wrapperspb.Bool(true),
			CommonTlsContext:         validation(&tlsv3.CertificateValidationContext{CaCertificateProviderInstance: providerInstance("roots")}),
		})}},
		{name: "client certificate required without roots", chains: []*listenerv3.FilterChain{withTLS(serverChain(nil, nil), &tlsv3.DownstreamTlsContext{
			RequireClientCertificate: wrapperspb.Bool(true),
			CommonTlsContext:         &tlsv3.CommonTlsContext{TlsCertificateProviderInstance: providerInstance("id")},
		})}},
		{name: "san matchers on a server", chains: []*listenerv3.FilterChain{withTLS(serverChain(nil, nil), &tlsv3.DownstreamTlsContext{
			CommonTlsContext: validation(&tlsv3.CertificateValidationContext{
				CaCertificateProviderInstance: providerInstance("roots"),
				MatchSubjectAltNames:          []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x"}}},
			}),
		})}},
		{name: "require_sni", chains: []*listenerv3.FilterChain{withTLS(serverChain(nil, nil), &tlsv3.DownstreamTlsContext{
			RequireSni:       wrapperspb.Bool(true),
			CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateProviderInstance: providerInstance("id")},
		})}},
		{name: "route to an empty cluster", chains: []*listenerv3.FilterChain{serverChain(nil, func(h *hcmv3.HttpConnectionManager) {
			vh := h.GetRouteConfig().GetVirtualHosts()[0]
			vh.Routes = append(vh.Routes, &routev3.Route{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/x/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: ""}}},
			})
		})}, differs: emptyClusterDiffers},
		{name: "tls without identity", chains: []*listenerv3.FilterChain{withTLS(serverChain(nil, nil), &tlsv3.DownstreamTlsContext{
			CommonTlsContext: &tlsv3.CommonTlsContext{},
		})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lis := &listenerv3.Listener{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 1},
				}}},
				FilterChains:       tt.chains,
				DefaultFilterChain: tt.dflt,
			}
			grpcNACK := grpcGoServerVerdict(t, lis)
			_, _, err := resources.ListenerType.DecodeTyped(nil, toAny(lis))
			t.Logf("goxds %v; grpc-go %q", err, grpcNACK)
			if tt.differs != "" {
				if (err != nil) == (grpcNACK != "") {
					t.Errorf("known difference gone: goxds %v, grpc-go %q; drop the note: %s", err, grpcNACK, tt.differs)
				}
				return
			}
			compare(t, err, grpcNACK)
		})
	}
}

// grpcGoServerVerdict serves lis, named as the server template names it
// for a listener on 127.0.0.1, to grpc-go's xDS-enabled server and returns
// the error_detail of its reply ("" for an ACK).
func grpcGoServerVerdict(t *testing.T, lis *listenerv3.Listener) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), verdictTimeout)
	defer cancel()
	s, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	var b map[string]any
	if err := json.Unmarshal(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: s.Address(), NodeID: "parity"}), &b); err != nil {
		t.Fatal(err)
	}
	b["server_listener_resource_name_template"] = serverTemplate
	b["certificate_providers"] = map[string]any{
		"id":    map[string]any{"plugin_name": "file_watcher", "config": map[string]any{"certificate_file": "/nonexistent/c.pem", "private_key_file": "/nonexistent/k.pem"}},
		"roots": map[string]any{"plugin_name": "file_watcher", "config": map[string]any{"ca_certificate_file": "/nonexistent/ca.pem"}},
	}
	contents, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := xds.NewGRPCServer(xds.BootstrapContentsForTesting(contents))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(raw)
	lis.Name = "grpc/server?xds.resource.listening_address=" + raw.Addr().String()
	lis.Address.GetSocketAddress().PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: uint32(raw.Addr().(*net.TCPAddr).Port)}
	verdict := exchange(ctx, t, s, resources.ListenerTypeURL, lis.Name, lis)
	settle(ctx, t, s, resources.ListenerTypeURL, lis)
	return verdict
}

// settle sends m again, unchanged, and waits for grpc-go's reply. grpc-go
// reads a response only once its watchers are done with the previous one,
// so its reply says that the callbacks of the first response have
// returned; an unchanged resource calls no watcher. Without it, Stop could
// run beside the Listener watcher's callback, which races inside grpc-go
// v1.85 (listenerWrapper.Close reads pendingFilterChainManager, which
// ResourceChanged writes unlocked).
func settle(ctx context.Context, t *testing.T, s *testutils.FakeServer, typeURL string, m proto.Message) {
	t.Helper()
	const nonce = "n2"
	if err := s.Send(&discoveryv3.DiscoveryResponse{
		TypeUrl: typeURL, VersionInfo: "2", Nonce: nonce, Resources: []*anypb.Any{toAny(m)},
	}); err != nil {
		t.Fatal(err)
	}
	for {
		req, err := s.NextRequest(ctx)
		if err != nil {
			t.Fatalf("waiting for grpc-go's reply to the resend: %v", err)
		}
		if req.GetTypeUrl() == typeURL && req.GetResponseNonce() == nonce {
			return
		}
	}
}
