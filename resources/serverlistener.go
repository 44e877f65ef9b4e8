package resources

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
)

// downstreamTLSName is the config a server-side Listener's transport
// socket must carry (gRFC A29).
const downstreamTLSName = "envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"

// ServerListener is the server half of a Listener, one without an
// api_listener, as an xDS-enabled gRPC server uses it (gRFC A36): the
// address it is for and the filter chains that connections are matched to.
type ServerListener struct {
	// Address and Port are the listener's socket_address.
	Address string
	Port    uint32
	// FilterChains are the usable filter chains, in the order received.
	// Chains gRPC can never match (a destination_port, server_names,
	// application_protocols, or a transport_protocol other than
	// raw_buffer) are left out without making the Listener invalid, as
	// gRPC does.
	FilterChains []*FilterChain
	// DefaultFilterChain serves connections no chain matches; nil when
	// the Listener has none, and such connections are closed.
	DefaultFilterChain *FilterChain
	// Entries are FilterChains expanded into one entry per combination
	// of destination prefix, source type, source prefix and source port:
	// the table a connection's chain is picked from (package
	// dataplane/authz does). Validation made no two of them equal: the
	// Listener would be invalid.
	Entries []FilterChainEntry
}

// SourceType is a filter chain's source_type match.
type SourceType int

// The source types of FilterChainMatch.
const (
	// SourceAny matches every peer.
	SourceAny SourceType = iota
	// SourceSameIPOrLoopback matches a peer on a loopback address or on
	// the connection's own local address.
	SourceSameIPOrLoopback
	// SourceExternal matches every other peer.
	SourceExternal
)

// FilterChainMatch is the part of a filter_chain_match gRPC uses.
type FilterChainMatch struct {
	// DestinationPrefixes match the connection's local address; empty
	// matches any.
	DestinationPrefixes []netip.Prefix
	// SourceType is matched against the peer's address.
	SourceType SourceType
	// SourcePrefixes match the peer's address; empty matches any.
	SourcePrefixes []netip.Prefix
	// SourcePorts match the peer's port; empty matches any.
	SourcePorts []uint32
}

// FilterChain is one validated filter chain of a ServerListener: its match
// and its HttpConnectionManager.
type FilterChain struct {
	// Name is the chain's optional name.
	Name string
	// Match is the chain's filter_chain_match.
	Match FilterChainMatch
	// RouteConfigName is the RouteConfiguration to fetch over RDS; empty
	// when the route configuration is inline.
	RouteConfigName string
	// InlineRouteConfig is the route configuration carried inline; nil
	// when RouteConfigName is set.
	InlineRouteConfig *RouteConfig
	// HTTPFilters are the connection manager's filters that run on a
	// server, in order, the terminal one (the router) last.
	HTTPFilters []HTTPFilter
	// TLS is the chain's DownstreamTlsContext as received, nil for
	// plaintext.
	TLS *tlsv3.DownstreamTlsContext
	// Security is what TLS asks for, nil for plaintext: the provider
	// instances of the server's certificate (IdentityInstance, always set)
	// and of the roots that verify clients (RootInstance, may be empty).
	// Only those fields are used on a server.
	Security *SecurityConfig
	// RequireClientCert is require_client_certificate: mutual TLS.
	RequireClientCert bool
	// PathNormalization is the connection manager's path handling, for an
	// HTTP server; a gRPC server does not use it.
	PathNormalization PathNormalization
	// StripHostPort is the connection manager's strip_matching_host_port
	// or strip_any_host_port, for an HTTP server; a gRPC server does not
	// use it.
	StripHostPort HostPortStrip
	// StripTrailingHostDot is the connection manager's
	// strip_trailing_host_dot: an HTTP server drops a trailing dot of the
	// Host's name ("example.com.:80" is "example.com:80") before routing,
	// HTTP filters and the handler see it. gRPC's server does not use it.
	StripTrailingHostDot bool
}

// FilterChainEntry is one point of a filter chain's match.
type FilterChainEntry struct {
	// Destination and Source are a destination and a source prefix of
	// the chain, the zero Prefix when it has none: that matches every
	// address and loses to any prefix that is set.
	Destination, Source netip.Prefix
	// SourceType is the chain's source type.
	SourceType SourceType
	// SourcePort is a source port of the chain, 0 when it has none.
	SourcePort uint32
	// Chain is the filter chain the entry belongs to.
	Chain *FilterChain
}

func (l *Listener) setServerListener(ctx *DecodeContext, m *listenerv3.Listener) error {
	if n := len(m.GetListenerFilters()); n != 0 {
		return fieldErrorf("listener_filters", "not supported (%d present)", n)
	}
	if m.GetUseOriginalDst().GetValue() {
		return fieldErrorf("use_original_dst", "not supported")
	}
	sa := m.GetAddress().GetSocketAddress()
	if sa == nil {
		return fieldErrorf("address.socket_address", "missing (a server-side Listener, without api_listener, needs one)")
	}
	s := &ServerListener{Address: sa.GetAddress(), Port: sa.GetPortValue()}
	if dfc := m.GetDefaultFilterChain(); dfc != nil {
		fc, err := newFilterChain(ctx, dfc)
		if err != nil {
			return at("default_filter_chain", err)
		}
		s.DefaultFilterChain = fc
	}
	if err := s.setFilterChains(ctx, m.GetFilterChains()); err != nil {
		return err
	}
	if len(s.FilterChains) == 0 && s.DefaultFilterChain == nil {
		return fieldErrorf("filter_chains", "no filter chain gRPC can use and no default_filter_chain")
	}
	l.Server = s
	return nil
}

// setFilterChains validates the chains and builds their entries. Like gRPC
// it leaves out chains with match fields a gRPC server never matches, and
// for a destination prefix that some chain matches with transport_protocol
// raw_buffer, the chains with none (raw_buffer is more specific).
func (s *ServerListener) setFilterChains(ctx *DecodeContext, in []*listenerv3.FilterChain) error {
	type parsed struct {
		fc    *FilterChain
		proto *listenerv3.FilterChain
		at    int // index in the list received
		raw   bool
		dst   []netip.Prefix
	}
	var chains []parsed
	rawBuffer := make(map[netip.Prefix]bool)
	for i, p := range in {
		path := index("filter_chains", i) + ".filter_chain_match"
		m := p.GetFilterChainMatch()
		tp := m.GetTransportProtocol()
		if m.GetDestinationPort().GetValue() != 0 || len(m.GetServerNames()) != 0 ||
			len(m.GetApplicationProtocols()) != 0 || (tp != "" && tp != "raw_buffer") {
			continue
		}
		dst, err := prefixes(m.GetPrefixRanges())
		if err != nil {
			return at(path+".prefix_ranges", err)
		}
		src, err := prefixes(m.GetSourcePrefixRanges())
		if err != nil {
			return at(path+".source_prefix_ranges", err)
		}
		var st SourceType
		switch m.GetSourceType() {
		case listenerv3.FilterChainMatch_ANY:
			st = SourceAny
		case listenerv3.FilterChainMatch_SAME_IP_OR_LOOPBACK:
			st = SourceSameIPOrLoopback
		case listenerv3.FilterChainMatch_EXTERNAL:
			st = SourceExternal
		default:
			return fieldErrorf(path+".source_type", "unsupported value %d", m.GetSourceType())
		}
		fc := &FilterChain{Name: p.GetName(), Match: FilterChainMatch{
			DestinationPrefixes: dst, SourceType: st, SourcePrefixes: src, SourcePorts: m.GetSourcePorts(),
		}}
		d := orAny(dst)
		if tp == "raw_buffer" {
			for _, pf := range d {
				rawBuffer[pf] = true
			}
		}
		chains = append(chains, parsed{fc: fc, proto: p, at: i, raw: tp == "raw_buffer", dst: d})
	}
	// Overlaps are checked before the chains' filters, as gRPC does, so
	// that the verdict on a Listener with both faults is the same.
	seen := make(map[FilterChainEntry]bool)
	for ci, c := range chains {
		used := false
		for _, d := range c.dst {
			if !c.raw && rawBuffer[d] {
				continue
			}
			ports := c.fc.Match.SourcePorts
			if len(ports) == 0 {
				ports = []uint32{0}
			}
			for _, src := range orAny(c.fc.Match.SourcePrefixes) {
				for _, port := range ports {
					key := FilterChainEntry{Destination: d, Source: src, SourceType: c.fc.Match.SourceType, SourcePort: port}
					if seen[key] {
						return fieldErrorf(index("filter_chains", c.at)+".filter_chain_match",
							"overlaps an earlier filter chain (destination %v, source type %v, source %v, port %d)", d, key.SourceType, src, port)
					}
					seen[key] = true
					key.Chain = c.fc
					s.Entries = append(s.Entries, key)
					used = true
				}
			}
		}
		if !used {
			chains[ci].fc = nil
		}
	}
	for _, c := range chains {
		if c.fc == nil {
			continue
		}
		if err := c.fc.init(ctx, c.proto); err != nil {
			return at(index("filter_chains", c.at), err)
		}
		s.FilterChains = append(s.FilterChains, c.fc)
	}
	return nil
}

// orAny is ps, or the one zero Prefix that stands for "any" when ps is empty.
func orAny(ps []netip.Prefix) []netip.Prefix {
	if len(ps) == 0 {
		return []netip.Prefix{{}}
	}
	return ps
}

// prefixes parses CIDR ranges; an IPv4-mapped IPv6 address counts as IPv4.
func prefixes(in []*corev3.CidrRange) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, r := range in {
		a, err := netip.ParseAddr(r.GetAddressPrefix())
		if err != nil {
			return nil, fieldErrorf(index("", i)+".address_prefix", "invalid address %q", r.GetAddressPrefix())
		}
		a = a.Unmap()
		bits := int(r.GetPrefixLen().GetValue())
		if bits > a.BitLen() {
			return nil, fieldErrorf(index("", i)+".prefix_len", "%d is too long for %s (max %d)", bits, a, a.BitLen())
		}
		out = append(out, netip.PrefixFrom(a, bits).Masked())
	}
	return out, nil
}

func newFilterChain(ctx *DecodeContext, p *listenerv3.FilterChain) (*FilterChain, error) {
	fc := &FilterChain{Name: p.GetName()}
	if err := fc.init(ctx, p); err != nil {
		return nil, err
	}
	return fc, nil
}

// init validates p's network filters and transport socket into fc.
func (fc *FilterChain) init(ctx *DecodeContext, p *listenerv3.FilterChain) error {
	if err := fc.setFilters(ctx, p.GetFilters()); err != nil {
		return err
	}
	if ts := p.GetTransportSocket(); ts != nil {
		tls, sc, err := downstreamTLS(ts)
		if err != nil {
			return at("transport_socket", err)
		}
		if err := ctx.checkCertificateProviders(sc); err != nil {
			return at("transport_socket.typed_config.common_tls_context", err)
		}
		fc.TLS, fc.Security, fc.RequireClientCert = tls, sc, tls.GetRequireClientCertificate().GetValue()
	}
	return nil
}

// setFilters validates the network filters as gRPC does (gRFC A36): named,
// unique, each an HttpConnectionManager whose HTTP filters are valid for a
// server; the first one is the one used, the others only validated.
func (fc *FilterChain) setFilters(ctx *DecodeContext, in []*listenerv3.Filter) error {
	seen := make(map[string]bool, len(in))
	found := false
	for i, f := range in {
		path := index("filters", i)
		name := f.GetName()
		if name == "" {
			return fieldErrorf(path+".name", "must not be empty")
		}
		if seen[name] {
			return fieldErrorf(path+".name", "duplicate filter name %q", name)
		}
		seen[name] = true
		tc := f.GetTypedConfig()
		if tc == nil {
			return fieldErrorf(path, "filter %q has no typed_config", name)
		}
		if !anyIs(tc, hcmName) {
			return fieldErrorf(path+".typed_config", "unsupported network filter %s (only %s)", anyName(tc), hcmName)
		}
		hcm := new(hcmv3.HttpConnectionManager)
		if err := proto.Unmarshal(tc.GetValue(), hcm); err != nil {
			return fieldErrorf(path+".typed_config", "unmarshal HttpConnectionManager: %v", err)
		}
		filters, err := parseHTTPFilters(ctx, hcm.GetHttpFilters(), true)
		if err != nil {
			return at(path+".typed_config", err)
		}
		if found {
			continue
		}
		found = true
		if err := fc.setHCM(ctx, hcm, filters); err != nil {
			return at(path+".typed_config", err)
		}
	}
	if !found {
		return fieldErrorf("filters", "no HttpConnectionManager")
	}
	return nil
}

func (fc *FilterChain) setHCM(ctx *DecodeContext, hcm *hcmv3.HttpConnectionManager, filters []HTTPFilter) error {
	// gRFC A41: RBAC sees the peer's own address, so nothing may derive
	// another one from headers.
	if hcm.GetXffNumTrustedHops() != 0 {
		return fieldErrorf("xff_num_trusted_hops", "must be 0 (is %d)", hcm.GetXffNumTrustedHops())
	}
	if len(hcm.GetOriginalIpDetectionExtensions()) != 0 {
		return fieldErrorf("original_ip_detection_extensions", "must be empty")
	}
	switch rs := hcm.GetRouteSpecifier().(type) {
	case *hcmv3.HttpConnectionManager_Rds:
		// Unlike a client Listener, gRPC's server takes only ads here.
		if k := configSourceKind(rs.Rds.GetConfigSource()); k != "ads" {
			return fieldErrorf("rds.config_source", "is %q, want ads", k)
		}
		if rs.Rds.GetRouteConfigName() == "" {
			return fieldErrorf("rds.route_config_name", "must not be empty")
		}
		fc.RouteConfigName = rs.Rds.GetRouteConfigName()
	case *hcmv3.HttpConnectionManager_RouteConfig:
		rc, err := newRouteConfig(ctx, rs.RouteConfig, nil)
		if err != nil {
			return at("route_config", err)
		}
		fc.InlineRouteConfig = rc
	case nil:
		return errors.New("no route specifier (want rds or route_config)")
	default:
		return fmt.Errorf("unsupported route specifier %T", rs)
	}
	pn, err := pathNormalization(hcm)
	if err != nil {
		return err
	}
	strip, err := hostPortStrip(hcm)
	if err != nil {
		return err
	}
	fc.HTTPFilters, fc.PathNormalization, fc.StripHostPort = filters, pn, strip
	fc.StripTrailingHostDot = hcm.GetStripTrailingHostDot()
	return nil
}

// downstreamTLS validates a filter chain's transport socket as gRPC does
// (gRFC A29): a DownstreamTlsContext without SNI requirements or strict
// OCSP stapling, whose common_tls_context names the provider instance of
// the server's certificate (current or deprecated fields, as for a
// cluster); a client certificate can only be required when there are
// roots to check it against; and SAN matchers and system roots, which a
// gRPC server does not apply to its clients, are refused rather than
// ignored.
func downstreamTLS(ts *corev3.TransportSocket) (*tlsv3.DownstreamTlsContext, *SecurityConfig, error) {
	if ts.GetName() != tlsTransportSocketName {
		return nil, nil, fieldErrorf("name", "is %q, want %q", ts.GetName(), tlsTransportSocketName)
	}
	tc := ts.GetTypedConfig()
	if !anyIs(tc, downstreamTLSName) {
		return nil, nil, fieldErrorf("typed_config", "holds %s, want %s", anyName(tc), downstreamTLSName)
	}
	d := new(tlsv3.DownstreamTlsContext)
	if err := proto.Unmarshal(tc.GetValue(), d); err != nil {
		return nil, nil, fieldErrorf("typed_config", "unmarshal DownstreamTlsContext: %v", err)
	}
	const path = "typed_config.common_tls_context"
	if d.GetRequireSni().GetValue() {
		return nil, nil, fieldErrorf("typed_config.require_sni", "not supported")
	}
	if d.GetOcspStaplePolicy() != tlsv3.DownstreamTlsContext_LENIENT_STAPLING {
		return nil, nil, fieldErrorf("typed_config.ocsp_staple_policy", "%v not supported (only LENIENT_STAPLING)", d.GetOcspStaplePolicy())
	}
	common := d.GetCommonTlsContext()
	if common == nil {
		return nil, nil, fieldErrorf(path, "missing")
	}
	if common.GetTlsParams() != nil {
		return nil, nil, fieldErrorf(path+".tls_params", "not supported")
	}
	if common.GetCustomHandshaker() != nil {
		return nil, nil, fieldErrorf(path+".custom_handshaker", "not supported")
	}
	sc, err := securityFromProviderFields(common)
	if err != nil {
		return nil, nil, at(path, err)
	}
	old, err := securityFromDeprecatedFields(common)
	if err != nil {
		return nil, nil, at(path, err)
	}
	// A current field, where set, wins over its deprecated twin.
	if sc.IdentityInstance == "" {
		sc.IdentityInstance, sc.IdentityCertName = old.IdentityInstance, old.IdentityCertName
	}
	if sc.RootInstance == "" && !sc.UseSystemRoots {
		sc.RootInstance, sc.RootCertName = old.RootInstance, old.RootCertName
	}
	sc.SANMatchers = append(sc.SANMatchers, old.SANMatchers...)
	switch {
	case sc.IdentityInstance == "":
		return nil, nil, fieldErrorf(path+".tls_certificate_provider_instance", "missing: a server needs its identity certificate")
	case len(sc.SANMatchers) != 0:
		return nil, nil, fieldErrorf(path+".validation_context.match_subject_alt_names", "not supported on a server")
	case sc.UseSystemRoots:
		return nil, nil, fieldErrorf(path+".validation_context.system_root_certs", "not supported on a server")
	case d.GetRequireClientCertificate().GetValue() && sc.RootInstance == "":
		return nil, nil, fieldErrorf("typed_config.require_client_certificate", "set without a validation context's ca_certificate_provider_instance to check client certificates with")
	}
	return d, sc, nil
}

// String names a SourceType as the proto does.
func (t SourceType) String() string {
	switch t {
	case SourceAny:
		return "ANY"
	case SourceSameIPOrLoopback:
		return "SAME_IP_OR_LOOPBACK"
	case SourceExternal:
		return "EXTERNAL"
	}
	return "SourceType(" + strconv.Itoa(int(t)) + ")"
}
