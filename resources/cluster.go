package resources

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
)

// ClusterType is the built-in CDS type: Cluster resources, decoded into
// *Cluster. Every SotW response carries all clusters, and the wildcard may
// be used.
var ClusterType = NewType(TypeOptions[*Cluster]{
	TypeURL:                    ClusterTypeURL,
	AllResourcesRequiredInSotW: true,
	SupportsWildcard:           true,
	Decode:                     decodeCluster,
})

const (
	aggregateClusterTypeName = "envoy.clusters.aggregate"
	aggregateConfigName      = "envoy.extensions.clusters.aggregate.v3.ClusterConfig"
	upstreamTLSName          = "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"

	// defaultMaxRequests, defaultMaxPendingRequests and
	// defaultMaxConnections are the circuit breakers' defaults
	// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/cluster/v3/circuit_breaker.proto).
	defaultMaxRequests        = 1024
	defaultMaxPendingRequests = 1024
	defaultMaxConnections     = 1024
)

// ClusterKind says how a cluster finds its endpoints.
type ClusterKind int

const (
	// ClusterKindEDS clusters get endpoints over EDS (see EDSServiceName).
	ClusterKindEDS ClusterKind = iota
	// ClusterKindLogicalDNS clusters resolve DNSHost.
	ClusterKindLogicalDNS
	// ClusterKindAggregate clusters are a priority list of other clusters.
	ClusterKindAggregate
)

// String returns the ClusterKind as text, for logs and errors.
func (k ClusterKind) String() string {
	switch k {
	case ClusterKindEDS:
		return "EDS"
	case ClusterKindLogicalDNS:
		return "LOGICAL_DNS"
	case ClusterKindAggregate:
		return "AGGREGATE"
	}
	return "ClusterKind(" + strconv.Itoa(int(k)) + ")"
}

// Cluster is a validated Cluster. Like every decoded value it is immutable
// and shared: callers must not modify it.
type Cluster struct {
	// Name is the resource name.
	Name string
	// Kind says which of the fields below describe the endpoints.
	Kind ClusterKind
	// ServiceName is eds_cluster_config.service_name as received (may be
	// empty); the EDSServiceName method gives the name to fetch. (A field
	// cannot share the method's name.)
	ServiceName string
	// DNSHost and DNSPort are the single address of a LOGICAL_DNS cluster.
	DNSHost string
	DNSPort uint32
	// AggregateChildren are an aggregate cluster's clusters in priority
	// order (never empty).
	AggregateChildren []string
	// LBPolicy is the load balancing policy.
	LBPolicy LBPolicy
	// MaxRequests is circuit_breakers' max_requests for priority DEFAULT,
	// 1024 when unset.
	MaxRequests uint32
	// MaxPendingRequests and MaxConnections are circuit_breakers'
	// max_pending_requests and max_connections for priority DEFAULT, 1024
	// each when unset. Only an HTTP client reads them (httpxds: requests
	// waiting for a connection, and connections to all endpoints of the
	// cluster); gRPC ignores them, as grpc-go does.
	MaxPendingRequests, MaxConnections uint32
	// MaxConnectionsPerHost is circuit_breakers' per_host_thresholds'
	// max_connections for priority DEFAULT (gRFC A105): gRPC's
	// max_connections_per_subchannel, how many connections a channel may
	// make to each endpoint of the cluster when the server's
	// MAX_CONCURRENT_STREAMS are all in use. 0 when unset (one
	// connection), and always 0 unless EnvConnectionScaling is "true";
	// never 0 when set, which is NACKed.
	MaxConnectionsPerHost uint32
	// TLS is the transport socket's UpstreamTlsContext as received, nil for
	// plaintext.
	TLS *tlsv3.UpstreamTlsContext
	// Security is TLS validated and read as gRPC reads it (gRFC A29), nil
	// exactly when TLS is nil.
	Security *SecurityConfig
	// HTTP11Proxy reports that the transport socket is an
	// Http11ProxyUpstreamTransport (gRFC A86): endpoints whose metadata
	// names a proxy (Endpoint.ProxyAddress) are reached through an HTTP/1.1
	// CONNECT tunnel, with TLS (above) inside it. Endpoints naming none are
	// reached directly, as in grpc-go.
	HTTP11Proxy bool
	// LRSServerSelf reports that load is to be reported to the management
	// server that sent the cluster (lrs_server: self).
	LRSServerSelf bool
	// LRSServer is, with LRSServerSelf, the management server that sent
	// the cluster (DecodeContext.Server): the one to report load to. After
	// a fallback (gRFC A71) it is the fallback server that sent this
	// value, not the authority's first. Nil when the cluster was decoded
	// without a server known, and without LRSServerSelf. Shared with the
	// client: must not be modified.
	LRSServer *bootstrap.ServerConfig
	// LRSReportEndpointMetrics is lrs_report_endpoint_metrics: which backend
	// metrics of RPCs' ORCA load reports the load reports carry (gRFC
	// A85); nil when unset.
	LRSReportEndpointMetrics []string
	// OutlierDetection is the validated outlier_detection, nil when unset.
	OutlierDetection *clusterv3.OutlierDetection
	// raw is the serialized message as received, unmarshalled again by
	// Raw: kept as bytes because the decoded message, which few callers
	// read, is several times larger (see docs/PERFORMANCE.md).
	raw []byte
}

// ResourceName implements Resource.
func (c *Cluster) ResourceName() string {
	if c == nil {
		return ""
	}
	return c.Name
}

// DependsOnSource implements SourceDependent: a cluster reporting load to
// the server that sent it (lrs_server "self") names that server.
func (c *Cluster) DependsOnSource() bool { return c != nil && c.LRSServerSelf }

// Raw returns the message as received, for the fields Cluster does not
// model. It is unmarshalled from the bytes received on each call: the
// caller owns the result. It returns nil for a value not made by the
// decoder.
func (c *Cluster) Raw() *clusterv3.Cluster {
	if c == nil || c.raw == nil {
		return nil
	}
	m := new(clusterv3.Cluster)
	// These bytes were unmarshalled once already: this cannot fail.
	if proto.Unmarshal(c.raw, m) != nil {
		return nil
	}
	return m
}

// Proto implements Resource; it returns Raw.
func (c *Cluster) Proto() proto.Message { return c.Raw() }

// EDSServiceName returns the name of the ClusterLoadAssignment an EDS
// cluster's endpoints come from: service_name, or the cluster's name when
// that is empty.
func (c *Cluster) EDSServiceName() string {
	if c.ServiceName != "" {
		return c.ServiceName
	}
	return c.Name
}

// clusterMsgs recycles decodeCluster's messages (see msgPool).
var clusterMsgs msgPool[clusterv3.Cluster, *clusterv3.Cluster]

func decodeCluster(ctx *DecodeContext, body *anypb.Any) (string, *Cluster, error) {
	m := clusterMsgs.get()
	defer clusterMsgs.put(m)
	if err := proto.Unmarshal(body.GetValue(), m); err != nil {
		return "", nil, fmt.Errorf("unmarshal Cluster: %v", err)
	}
	name := m.GetName()
	if name == "" {
		return "", nil, fieldErrorf("name", "must not be empty")
	}
	c := &Cluster{Name: name, MaxRequests: defaultMaxRequests, MaxPendingRequests: defaultMaxPendingRequests,
		MaxConnections: defaultMaxConnections, raw: body.GetValue()}
	if err := c.init(ctx, m); err != nil {
		return name, nil, err
	}
	return name, c, nil
}

func (c *Cluster) init(ctx *DecodeContext, m *clusterv3.Cluster) error {
	if err := c.setDiscovery(m); err != nil {
		return err
	}
	lb, err := lbPolicyOf(m)
	if err != nil {
		return err
	}
	c.LBPolicy = lb
	// The first thresholds of priority DEFAULT count, as Envoy reads
	// them; any uint32 is a valid limit (0 refuses every request that
	// would need it), so nothing here is NACKed.
	for _, t := range m.GetCircuitBreakers().GetThresholds() {
		if t.GetPriority() != corev3.RoutingPriority_DEFAULT {
			continue
		}
		if mr := t.GetMaxRequests(); mr != nil {
			c.MaxRequests = mr.GetValue()
		}
		if mp := t.GetMaxPendingRequests(); mp != nil {
			c.MaxPendingRequests = mp.GetValue()
		}
		if mc := t.GetMaxConnections(); mc != nil {
			c.MaxConnections = mc.GetValue()
		}
		break
	}
	if connectionScalingFromEnv() {
		if err := c.setPerHost(m.GetCircuitBreakers().GetPerHostThresholds()); err != nil {
			return at("circuit_breakers", err)
		}
	}
	if err := c.setTransportSocket(ctx, m); err != nil {
		return err
	}
	if lrs := m.GetLrsServer(); lrs != nil {
		if k := configSourceKind(lrs); k != "self" {
			return fieldErrorf("lrs_server", "unsupported config source %q (want self)", k)
		}
		c.LRSServerSelf = true
		c.LRSServer = ctx.server()
	}
	c.LRSReportEndpointMetrics = m.GetLrsReportEndpointMetrics()
	if od := m.GetOutlierDetection(); od != nil {
		if err := checkOutlierDetection(od); err != nil {
			return at("outlier_detection", err)
		}
		c.OutlierDetection = od
	}
	return nil
}

func (c *Cluster) setDiscovery(m *clusterv3.Cluster) error {
	switch d := m.GetClusterDiscoveryType().(type) {
	case *clusterv3.Cluster_ClusterType:
		return c.setAggregate(d.ClusterType)
	case *clusterv3.Cluster_Type, nil: // unset is STATIC, the enum's zero
		switch t := m.GetType(); t {
		case clusterv3.Cluster_EDS:
			return c.setEDS(m)
		case clusterv3.Cluster_LOGICAL_DNS:
			return c.setLogicalDNS(m)
		default:
			return fieldErrorf("type", "%v is not supported (want EDS, LOGICAL_DNS or an aggregate cluster_type)", t)
		}
	default:
		return fmt.Errorf("unsupported cluster discovery type %T", d)
	}
}

func (c *Cluster) setEDS(m *clusterv3.Cluster) error {
	c.Kind = ClusterKindEDS
	eds := m.GetEdsClusterConfig()
	if eds == nil {
		return fieldErrorf("eds_cluster_config", "missing")
	}
	if err := checkConfigSource(eds.GetEdsConfig()); err != nil {
		return at("eds_cluster_config.eds_config", err)
	}
	c.ServiceName = eds.GetServiceName()
	// An xdstp: name is a full resource URL of the Cluster; the matching
	// ClusterLoadAssignment must be named explicitly (gRFC A47).
	if c.ServiceName == "" && strings.HasPrefix(c.Name, "xdstp:") {
		return fieldErrorf("eds_cluster_config.service_name", "must be set for a cluster with an xdstp: name")
	}
	return nil
}

func (c *Cluster) setLogicalDNS(m *clusterv3.Cluster) error {
	c.Kind = ClusterKindLogicalDNS
	la := m.GetLoadAssignment()
	if la == nil {
		return fieldErrorf("load_assignment", "missing (a LOGICAL_DNS cluster needs one)")
	}
	if n := len(la.GetEndpoints()); n != 1 {
		return fieldErrorf("load_assignment.endpoints", "want exactly one locality, got %d", n)
	}
	lbes := la.GetEndpoints()[0].GetLbEndpoints()
	if n := len(lbes); n != 1 {
		return fieldErrorf("load_assignment.endpoints[0].lb_endpoints", "want exactly one endpoint, got %d", n)
	}
	const path = "load_assignment.endpoints[0].lb_endpoints[0].endpoint"
	ep := lbes[0].GetEndpoint()
	if ep == nil {
		return fieldErrorf(path, "missing")
	}
	sa := ep.GetAddress().GetSocketAddress()
	if sa == nil {
		return fieldErrorf(path+".address", "want a socket_address")
	}
	if sa.GetResolverName() != "" {
		return fieldErrorf(path+".address.socket_address.resolver_name", "custom resolvers are not supported")
	}
	if sa.GetAddress() == "" {
		return fieldErrorf(path+".address.socket_address.address", "must not be empty")
	}
	port, err := socketPort(sa)
	if err != nil {
		return at(path+".address.socket_address", err)
	}
	c.DNSHost, c.DNSPort = sa.GetAddress(), port
	return nil
}

func (c *Cluster) setAggregate(ct *clusterv3.Cluster_CustomClusterType) error {
	if ct.GetName() != aggregateClusterTypeName {
		return fieldErrorf("cluster_type.name", "%q is not supported (want %s)", ct.GetName(), aggregateClusterTypeName)
	}
	tc := ct.GetTypedConfig()
	if !anyIs(tc, aggregateConfigName) {
		return fieldErrorf("cluster_type.typed_config", "holds %s, want %s", anyName(tc), aggregateConfigName)
	}
	cfg := new(aggregatev3.ClusterConfig)
	if err := proto.Unmarshal(tc.GetValue(), cfg); err != nil {
		return fieldErrorf("cluster_type.typed_config", "unmarshal ClusterConfig: %v", err)
	}
	children := cfg.GetClusters()
	if len(children) == 0 {
		return fieldErrorf("cluster_type.typed_config.clusters", "must not be empty")
	}
	for i, child := range children {
		switch child {
		case "":
			return fieldErrorf(index("cluster_type.typed_config.clusters", i), "must not be empty")
		case c.Name:
			return fieldErrorf(index("cluster_type.typed_config.clusters", i), "aggregate cluster %q lists itself", child)
		}
	}
	c.Kind, c.AggregateChildren = ClusterKindAggregate, children
	return nil
}

func (c *Cluster) setTransportSocket(ctx *DecodeContext, m *clusterv3.Cluster) error {
	if n := len(m.GetTransportSocketMatches()); n != 0 {
		return fieldErrorf("transport_socket_matches", "not supported (got %d)", n)
	}
	ts, proxied, err := unwrapHTTP11Proxy(m.GetTransportSocket())
	if err != nil {
		return err
	}
	c.HTTP11Proxy = proxied
	if ts == nil {
		return nil
	}
	path := "transport_socket"
	if proxied {
		path = "transport_socket.typed_config.transport_socket"
	}
	if ts.GetName() != tlsTransportSocketName {
		return fieldErrorf(path+".name", "%q is not supported (want %q)", ts.GetName(), tlsTransportSocketName)
	}
	tc := ts.GetTypedConfig()
	if !anyIs(tc, upstreamTLSName) {
		return fieldErrorf(path+".typed_config", "holds %s, want %s", anyName(tc), upstreamTLSName)
	}
	tls := new(tlsv3.UpstreamTlsContext)
	if err := proto.Unmarshal(tc.GetValue(), tls); err != nil {
		return fieldErrorf(path+".typed_config", "unmarshal UpstreamTlsContext: %v", err)
	}
	sc, err := securityConfig(tls)
	if err != nil {
		return at(path+".typed_config", err)
	}
	if err := ctx.checkCertificateProviders(sc); err != nil {
		return at(path+".typed_config.common_tls_context", err)
	}
	c.TLS, c.Security = tls, sc
	return nil
}

// checkOutlierDetection applies gRFC A50's rules: durations valid and not
// negative, percentages at most 100. enforcing_consecutive_5xx and
// enforcing_consecutive_gateway_failure, which only an HTTP client reads
// (outlier.ConfigOfHTTP, where above 100 acts as 100), are not judged: a
// Cluster is one verdict for every client of the process, gRPC ignores
// those fields (A50), and grpc-go accepts a Cluster whatever they hold.
func checkOutlierDetection(od *clusterv3.OutlierDetection) error {
	for _, d := range []struct {
		field string
		value *durationpb.Duration
	}{
		{"interval", od.GetInterval()},
		{"base_ejection_time", od.GetBaseEjectionTime()},
		{"max_ejection_time", od.GetMaxEjectionTime()},
	} {
		if _, err := optionalDuration(d.value); err != nil {
			return at(d.field, err)
		}
	}
	for _, p := range []struct {
		field string
		value *wrapperspb.UInt32Value
	}{
		{"max_ejection_percent", od.GetMaxEjectionPercent()},
		{"enforcing_success_rate", od.GetEnforcingSuccessRate()},
		{"failure_percentage_threshold", od.GetFailurePercentageThreshold()},
		{"enforcing_failure_percentage", od.GetEnforcingFailurePercentage()},
	} {
		if v := p.value.GetValue(); v > 100 {
			return fieldErrorf(p.field, "must be at most 100, got %d", v)
		}
	}
	return nil
}

// socketPort returns a socket address's port_value, which must be a TCP
// port (1 to 65535); named ports are not supported.
func socketPort(sa *corev3.SocketAddress) (uint32, error) {
	switch p := sa.GetPortSpecifier().(type) {
	case *corev3.SocketAddress_PortValue:
		if p.PortValue == 0 || p.PortValue > 65535 {
			return 0, fieldErrorf("port_value", "%d is not a valid port", p.PortValue)
		}
		return p.PortValue, nil
	case *corev3.SocketAddress_NamedPort:
		return 0, fieldErrorf("named_port", "not supported (use port_value)")
	}
	return 0, errors.New("no port")
}
