package resources

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// serverHCM is a valid server connection manager with an inline route
// configuration.
func serverHCM() *hcmv3.HttpConnectionManager {
	return &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: simpleRouteConfig("", "c")},
		HttpFilters:    []*hcmv3.HttpFilter{routerFilter()},
	}
}

func hcmFilter(name string, h *hcmv3.HttpConnectionManager) *listenerv3.Filter {
	return &listenerv3.Filter{Name: name, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: toAny(h)}}
}

func chain(name string, m *listenerv3.FilterChainMatch) *listenerv3.FilterChain {
	return &listenerv3.FilterChain{Name: name, FilterChainMatch: m, Filters: []*listenerv3.Filter{hcmFilter("hcm", serverHCM())}}
}

func cidr(addr string, bits uint32) *corev3.CidrRange {
	return &corev3.CidrRange{AddressPrefix: addr, PrefixLen: wrapperspb.UInt32(bits)}
}

func serverListener(chains ...*listenerv3.FilterChain) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:         "grpc/server?xds.resource.listening_address=0.0.0.0:8080",
		Address:      socketAddr("0.0.0.0", 8080),
		FilterChains: chains,
	}
}

func downstreamSocket(d *tlsv3.DownstreamTlsContext) *corev3.TransportSocket {
	return &corev3.TransportSocket{Name: tlsTransportSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: toAny(d)}}
}

func identity() *tlsv3.CommonTlsContext {
	return &tlsv3.CommonTlsContext{TlsCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "id"}}
}

func TestDecodeServerListenerRules(t *testing.T) {
	tests := []struct {
		name    string
		lis     func(l *listenerv3.Listener)
		wantErr string
	}{
		{name: "one chain"},
		{name: "default chain only", lis: func(l *listenerv3.Listener) {
			l.DefaultFilterChain, l.FilterChains = l.FilterChains[0], nil
		}},
		{name: "rds over ads", lis: func(l *listenerv3.Listener) {
			l.FilterChains[0].Filters[0] = hcmFilter("hcm", rdsHCM("rc"))
		}},
		{
			name: "rds over self",
			lis: func(l *listenerv3.Listener) {
				h := rdsHCM("rc")
				h.GetRds().ConfigSource = selfSource()
				l.FilterChains[0].Filters[0] = hcmFilter("hcm", h)
			},
			wantErr: `filter_chains[0].filters[0].typed_config.rds.config_source: is "self", want ads`,
		},
		{name: "no address", lis: func(l *listenerv3.Listener) { l.Address = nil }, wantErr: "address.socket_address: missing"},
		{
			name:    "listener filters",
			lis:     func(l *listenerv3.Listener) { l.ListenerFilters = []*listenerv3.ListenerFilter{{Name: "x"}} },
			wantErr: "listener_filters: not supported",
		},
		{
			name:    "use_original_dst",
			lis:     func(l *listenerv3.Listener) { l.UseOriginalDst = wrapperspb.Bool(true) },
			wantErr: "use_original_dst: not supported",
		},
		{
			name:    "no chains at all",
			lis:     func(l *listenerv3.Listener) { l.FilterChains = nil },
			wantErr: "filter_chains: no filter chain gRPC can use and no default_filter_chain",
		},
		{
			name: "only chains gRPC never matches",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains = []*listenerv3.FilterChain{
					chain("port", &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(80)}),
					chain("sni", &listenerv3.FilterChainMatch{ServerNames: []string{"a"}}),
					chain("alpn", &listenerv3.FilterChainMatch{ApplicationProtocols: []string{"h2"}}),
					chain("tls", &listenerv3.FilterChainMatch{TransportProtocol: "tls"}),
				}
			},
			wantErr: "filter_chains: no filter chain gRPC can use",
		},
		{
			name: "a dropped chain is not validated",
			lis: func(l *listenerv3.Listener) {
				bad := chain("sni", &listenerv3.FilterChainMatch{ServerNames: []string{"a"}})
				bad.Filters = nil
				l.FilterChains = append(l.FilterChains, bad)
			},
		},
		{
			name: "overlapping chains",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains = append(l.FilterChains, chain("again", nil))
			},
			wantErr: "filter_chains[1].filter_chain_match: overlaps an earlier filter chain",
		},
		{
			name: "overlap on one port of several",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains = []*listenerv3.FilterChain{
					chain("a", &listenerv3.FilterChainMatch{SourcePorts: []uint32{1, 2}}),
					chain("b", &listenerv3.FilterChainMatch{SourcePorts: []uint32{3, 2}}),
				}
			},
			wantErr: "filter_chains[1].filter_chain_match: overlaps",
		},
		{
			name: "raw_buffer hides the same match without a transport protocol",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains = append(l.FilterChains, chain("raw", &listenerv3.FilterChainMatch{TransportProtocol: "raw_buffer"}))
			},
		},
		{
			name: "bad destination prefix",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains[0].FilterChainMatch = &listenerv3.FilterChainMatch{PrefixRanges: []*corev3.CidrRange{cidr("10.0.0.300", 8)}}
			},
			wantErr: `filter_chains[0].filter_chain_match.prefix_ranges[0].address_prefix: invalid address "10.0.0.300"`,
		},
		{
			name: "source prefix too long",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains[0].FilterChainMatch = &listenerv3.FilterChainMatch{SourcePrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 33)}}
			},
			wantErr: "filter_chain_match.source_prefix_ranges[0].prefix_len: 33 is too long for 10.0.0.0 (max 32)",
		},
		{
			name: "unknown source type",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains[0].FilterChainMatch = &listenerv3.FilterChainMatch{SourceType: 7}
			},
			wantErr: "filter_chain_match.source_type: unsupported value 7",
		},
		{
			name:    "no network filter",
			lis:     func(l *listenerv3.Listener) { l.FilterChains[0].Filters = nil },
			wantErr: "filter_chains[0].filters: no HttpConnectionManager",
		},
		{
			name: "duplicate network filter names",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains[0].Filters = append(l.FilterChains[0].Filters, hcmFilter("hcm", serverHCM()))
			},
			wantErr: `filters[1].name: duplicate filter name "hcm"`,
		},
		{
			name: "a second connection manager is validated too",
			lis: func(l *listenerv3.Listener) {
				h := serverHCM()
				h.HttpFilters = nil
				l.FilterChains[0].Filters = append(l.FilterChains[0].Filters, hcmFilter("hcm2", h))
			},
			wantErr: "filters[1].typed_config.http_filters: no filter",
		},
		{
			name: "unsupported network filter",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains[0].Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: toAny(&faultv3.HTTPFault{})}
			},
			wantErr: "filters[0].typed_config: unsupported network filter",
		},
		{
			name: "client-only HTTP filter",
			lis: func(l *listenerv3.Listener) {
				h := serverHCM()
				h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "fault", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: toAny(&faultv3.HTTPFault{})}}}, h.HttpFilters...)
				l.FilterChains[0].Filters[0] = hcmFilter("hcm", h)
			},
			wantErr: `filter "fault" of type envoy.extensions.filters.http.fault.v3.HTTPFault cannot run on a gRPC server`,
		},
		{
			name: "xff_num_trusted_hops",
			lis: func(l *listenerv3.Listener) {
				h := serverHCM()
				h.XffNumTrustedHops = 1
				l.FilterChains[0].Filters[0] = hcmFilter("hcm", h)
			},
			wantErr: "typed_config.xff_num_trusted_hops: must be 0",
		},
		{
			name: "tls",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains[0].TransportSocket = downstreamSocket(&tlsv3.DownstreamTlsContext{CommonTlsContext: identity()})
			},
		},
		{
			name: "tls wrong name",
			lis: func(l *listenerv3.Listener) {
				ts := downstreamSocket(&tlsv3.DownstreamTlsContext{CommonTlsContext: identity()})
				ts.Name = "tls"
				l.FilterChains[0].TransportSocket = ts
			},
			wantErr: `filter_chains[0].transport_socket.name: is "tls"`,
		},
		{
			name: "tls require_sni",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains[0].TransportSocket = downstreamSocket(&tlsv3.DownstreamTlsContext{CommonTlsContext: identity(), RequireSni: wrapperspb.Bool(true)})
			},
			wantErr: "transport_socket.typed_config.require_sni: not supported",
		},
		{
			name: "tls strict stapling",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains[0].TransportSocket = downstreamSocket(&tlsv3.DownstreamTlsContext{
					CommonTlsContext: identity(), OcspStaplePolicy: tlsv3.DownstreamTlsContext_STRICT_STAPLING,
				})
			},
			wantErr: "transport_socket.typed_config.ocsp_staple_policy",
		},
		{
			name: "tls client certificate required without roots",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains[0].TransportSocket = downstreamSocket(&tlsv3.DownstreamTlsContext{
					CommonTlsContext: identity(), RequireClientCertificate: wrapperspb.Bool(true),
				})
			},
			wantErr: "transport_socket.typed_config.require_client_certificate: set without",
		},
		{
			name: "tls without identity",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains[0].TransportSocket = downstreamSocket(&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{}})
			},
			wantErr: "tls_certificate_provider_instance: missing",
		},
		{
			name: "tls with the deprecated identity field and roots",
			lis: func(l *listenerv3.Listener) {
				l.FilterChains[0].TransportSocket = downstreamSocket(&tlsv3.DownstreamTlsContext{
					RequireClientCertificate: wrapperspb.Bool(true),
					CommonTlsContext: &tlsv3.CommonTlsContext{
						TlsCertificateCertificateProviderInstance: &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: "id"},
						ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextCertificateProviderInstance{
							ValidationContextCertificateProviderInstance: &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: "roots"},
						},
					},
				})
			},
		},
		{
			name: "tls san matchers on a server",
			lis: func(l *listenerv3.Listener) {
				c := identity()
				c.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
					CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "roots"},
					MatchSubjectAltNames:          []*matcherv3.StringMatcher{exact("x")},
				}}
				l.FilterChains[0].TransportSocket = downstreamSocket(&tlsv3.DownstreamTlsContext{CommonTlsContext: c})
			},
			wantErr: "match_subject_alt_names: not supported on a server",
		},
		{
			name: "bad default chain",
			lis: func(l *listenerv3.Listener) {
				l.DefaultFilterChain = chain("d", nil)
				l.DefaultFilterChain.Filters = nil
			},
			wantErr: "default_filter_chain.filters: no HttpConnectionManager",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := serverListener(chain("c", nil))
			if tt.lis != nil {
				tt.lis(m)
			}
			_, l, err := decodeMsg(ListenerType, m)
			checkErr(t, err, tt.wantErr)
			if err == nil && m.FilterChains != nil && m.FilterChains[0].TransportSocket != nil {
				fc := l.Server.FilterChains[0]
				if fc.Security == nil || fc.Security.IdentityInstance != "id" {
					t.Errorf("Security = %+v, want identity from instance id", fc.Security)
				}
			}
			if err == nil && (l.Server == nil || l.HTTPFilters != nil || l.InlineRouteConfig != nil) {
				t.Errorf("decoded %+v, want a server Listener only", l)
			}
		})
	}
}
