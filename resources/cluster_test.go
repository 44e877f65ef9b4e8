package resources

import (
	"reflect"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// upstreamTLS returns an UpstreamTlsContext gRPC accepts: roots from the
// provider instance "roots", the given SNI.
func upstreamTLS(sni string) *tlsv3.UpstreamTlsContext {
	return &tlsv3.UpstreamTlsContext{Sni: sni, CommonTlsContext: &tlsv3.CommonTlsContext{
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "roots"},
		}},
	}}
}

func tlsSocket(ctx *tlsv3.UpstreamTlsContext) *corev3.TransportSocket {
	return &corev3.TransportSocket{
		Name:       "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: toAny(ctx)},
	}
}

// dnsEndpoint edits the single endpoint of a LOGICAL_DNS cluster.
func dnsEndpoint(edit func(lbe *endpointv3.LbEndpoint)) func(c *clusterv3.Cluster) {
	return func(c *clusterv3.Cluster) { edit(c.LoadAssignment.Endpoints[0].LbEndpoints[0]) }
}

func dnsSocket(edit func(sa *corev3.SocketAddress)) func(c *clusterv3.Cluster) {
	return dnsEndpoint(func(lbe *endpointv3.LbEndpoint) { edit(lbe.GetEndpoint().GetAddress().GetSocketAddress()) })
}

func TestDecodeClusterRules(t *testing.T) {
	const dnsPath = "load_assignment.endpoints[0].lb_endpoints[0].endpoint"
	eds := func() *clusterv3.Cluster { return edsCluster("c", "") }
	dns := func() *clusterv3.Cluster { return dnsCluster("c", "example.com", 443) }
	agg := func() *clusterv3.Cluster { return aggregateCluster("c", "a", "b") }
	tests := []struct {
		name    string
		base    func() *clusterv3.Cluster
		edit    func(c *clusterv3.Cluster)
		wantErr string
	}{
		// Discovery types.
		{name: "eds over ads", base: eds},
		{name: "eds over self", base: eds, edit: func(c *clusterv3.Cluster) { c.EdsClusterConfig.EdsConfig = selfSource() }},
		{name: "empty name", base: eds, edit: func(c *clusterv3.Cluster) { c.Name = "" }, wantErr: "name: must not be empty"},
		{name: "eds without config", base: eds, edit: func(c *clusterv3.Cluster) { c.EdsClusterConfig = nil },
			wantErr: "eds_cluster_config: missing"},
		{name: "eds without config source", base: eds, edit: func(c *clusterv3.Cluster) { c.EdsClusterConfig.EdsConfig = nil },
			wantErr: "eds_cluster_config.eds_config: missing (want ads or self)"},
		{name: "eds over an api config source", base: eds, edit: func(c *clusterv3.Cluster) {
			c.EdsClusterConfig.EdsConfig = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{}}
		}, wantErr: "eds_cluster_config.eds_config: unsupported config source"},
		{name: "xdstp name with service name", base: eds, edit: func(c *clusterv3.Cluster) {
			c.Name = "xdstp://auth/envoy.config.cluster.v3.Cluster/c"
			c.EdsClusterConfig.ServiceName = "xdstp://auth/envoy.config.endpoint.v3.ClusterLoadAssignment/c"
		}},
		{name: "xdstp name without service name", base: eds, edit: func(c *clusterv3.Cluster) {
			c.Name = "xdstp://auth/envoy.config.cluster.v3.Cluster/c"
		}, wantErr: "eds_cluster_config.service_name: must be set for a cluster with an xdstp: name"},
		{name: "static", base: eds, edit: func(c *clusterv3.Cluster) { c.ClusterDiscoveryType = nil },
			wantErr: "type: STATIC is not supported (want EDS, LOGICAL_DNS or an aggregate cluster_type)"},
		{name: "strict dns", base: eds, edit: func(c *clusterv3.Cluster) {
			c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
		}, wantErr: "type: STRICT_DNS is not supported"},

		{name: "logical dns", base: dns},
		{name: "logical dns ipv6", base: dns, edit: dnsSocket(func(sa *corev3.SocketAddress) { sa.Address = "::1" })},
		{name: "logical dns without load assignment", base: dns, edit: func(c *clusterv3.Cluster) { c.LoadAssignment = nil },
			wantErr: "load_assignment: missing"},
		{name: "logical dns with two localities", base: dns, edit: func(c *clusterv3.Cluster) {
			c.LoadAssignment.Endpoints = append(c.LoadAssignment.Endpoints, locality("b", 0, 1, lbEndpoint("b", 1)))
		}, wantErr: "load_assignment.endpoints: want exactly one locality, got 2"},
		{name: "logical dns without locality", base: dns, edit: func(c *clusterv3.Cluster) { c.LoadAssignment.Endpoints = nil },
			wantErr: "load_assignment.endpoints: want exactly one locality, got 0"},
		{name: "logical dns with two endpoints", base: dns, edit: func(c *clusterv3.Cluster) {
			l := c.LoadAssignment.Endpoints[0]
			l.LbEndpoints = append(l.LbEndpoints, lbEndpoint("b", 1))
		}, wantErr: "load_assignment.endpoints[0].lb_endpoints: want exactly one endpoint, got 2"},
		{name: "logical dns named endpoint", base: dns, edit: dnsEndpoint(func(lbe *endpointv3.LbEndpoint) {
			lbe.HostIdentifier = &endpointv3.LbEndpoint_EndpointName{EndpointName: "e"}
		}), wantErr: dnsPath + ": missing"},
		{name: "logical dns pipe", base: dns, edit: dnsEndpoint(func(lbe *endpointv3.LbEndpoint) {
			lbe.GetEndpoint().Address = &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/p"}}}
		}), wantErr: dnsPath + ".address: want a socket_address"},
		{name: "logical dns resolver", base: dns, edit: dnsSocket(func(sa *corev3.SocketAddress) { sa.ResolverName = "r" }),
			wantErr: dnsPath + ".address.socket_address.resolver_name: custom resolvers are not supported"},
		{name: "logical dns empty host", base: dns, edit: dnsSocket(func(sa *corev3.SocketAddress) { sa.Address = "" }),
			wantErr: dnsPath + ".address.socket_address.address: must not be empty"},
		{name: "logical dns port 0", base: dns, edit: dnsSocket(func(sa *corev3.SocketAddress) {
			sa.PortSpecifier = &corev3.SocketAddress_PortValue{}
		}), wantErr: dnsPath + ".address.socket_address.port_value: 0 is not a valid port"},
		{name: "logical dns port too big", base: dns, edit: dnsSocket(func(sa *corev3.SocketAddress) {
			sa.PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: 65536}
		}), wantErr: "port_value: 65536 is not a valid port"},
		{name: "logical dns named port", base: dns, edit: dnsSocket(func(sa *corev3.SocketAddress) {
			sa.PortSpecifier = &corev3.SocketAddress_NamedPort{NamedPort: "https"}
		}), wantErr: dnsPath + ".address.socket_address.named_port: not supported"},
		{name: "logical dns no port", base: dns, edit: dnsSocket(func(sa *corev3.SocketAddress) { sa.PortSpecifier = nil }),
			wantErr: dnsPath + ".address.socket_address: no port"},

		{name: "aggregate", base: agg},
		{name: "aggregate other cluster type", base: agg, edit: func(c *clusterv3.Cluster) { c.GetClusterType().Name = "envoy.clusters.redis" },
			wantErr: `cluster_type.name: "envoy.clusters.redis" is not supported`},
		{name: "aggregate wrong config type", base: agg, edit: func(c *clusterv3.Cluster) {
			c.GetClusterType().TypedConfig = toAny(&tlsv3.UpstreamTlsContext{})
		}, wantErr: "cluster_type.typed_config: holds " + upstreamTLSName + ", want " + aggregateConfigName},
		{name: "aggregate garbage config", base: agg, edit: func(c *clusterv3.Cluster) { c.GetClusterType().TypedConfig.Value = []byte{0x0a} },
			wantErr: "cluster_type.typed_config: unmarshal ClusterConfig"},
		{name: "aggregate without children", base: agg, edit: func(c *clusterv3.Cluster) {
			c.GetClusterType().TypedConfig = toAny(&aggregatev3.ClusterConfig{})
		}, wantErr: "cluster_type.typed_config.clusters: must not be empty"},
		{name: "aggregate empty child", base: agg, edit: func(c *clusterv3.Cluster) {
			c.GetClusterType().TypedConfig = toAny(&aggregatev3.ClusterConfig{Clusters: []string{"a", ""}})
		}, wantErr: "cluster_type.typed_config.clusters[1]: must not be empty"},
		{name: "aggregate lists itself", base: agg, edit: func(c *clusterv3.Cluster) {
			c.GetClusterType().TypedConfig = toAny(&aggregatev3.ClusterConfig{Clusters: []string{"a", "c"}})
		}, wantErr: `cluster_type.typed_config.clusters[1]: aggregate cluster "c" lists itself`},

		// Legacy lb_policy.
		{name: "ring hash defaults", base: eds, edit: func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_RING_HASH }},
		{name: "ring hash sizes at the limit", base: eds, edit: ringHash(clusterv3.Cluster_RingHashLbConfig_XX_HASH, 8<<20, 8<<20)},
		{name: "ring hash murmur", base: eds, edit: ringHash(clusterv3.Cluster_RingHashLbConfig_MURMUR_HASH_2, 1, 2),
			wantErr: "ring_hash_lb_config.hash_function: MURMUR_HASH_2 is not supported"},
		{name: "ring hash min above max", base: eds, edit: ringHash(clusterv3.Cluster_RingHashLbConfig_XX_HASH, 10, 9),
			wantErr: "ring_hash_lb_config.minimum_ring_size: 10 is above maximum_ring_size 9"},
		{name: "ring hash max above limit", base: eds, edit: ringHash(clusterv3.Cluster_RingHashLbConfig_XX_HASH, 10, 8<<20+1),
			wantErr: "ring_hash_lb_config.maximum_ring_size: 8388609 is above the limit 8388608"},
		{name: "ring hash min above limit", base: eds, edit: ringHash(clusterv3.Cluster_RingHashLbConfig_XX_HASH, 9<<20, 0),
			wantErr: "ring_hash_lb_config.minimum_ring_size: 9437184 is above the limit 8388608"},
		// gRPC reads a size of 0 as unset: the minimum is then 1024.
		{name: "ring hash zero min above max", base: eds, edit: ringHash(clusterv3.Cluster_RingHashLbConfig_XX_HASH, 0, 4),
			wantErr: "ring_hash_lb_config.minimum_ring_size: 1024 is above maximum_ring_size 4"},
		{name: "least request default", base: eds, edit: func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST }},
		{name: "least request choice count 1", base: eds, edit: leastRequest(1),
			wantErr: "least_request_lb_config.choice_count: must be at least 2, got 1"},
		{name: "random", base: eds, edit: func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_RANDOM },
			wantErr: "lb_policy: RANDOM is not supported"},
		{name: "maglev", base: eds, edit: func(c *clusterv3.Cluster) { c.LbPolicy = clusterv3.Cluster_MAGLEV },
			wantErr: "lb_policy: MAGLEV is not supported"},
		{name: "policy config without policy", base: eds, edit: func(c *clusterv3.Cluster) {
			c.LbPolicy = clusterv3.Cluster_LOAD_BALANCING_POLICY_CONFIG
		}, wantErr: "load_balancing_policy: missing"},

		// Circuit breakers, TLS, LRS, outlier detection.
		{name: "circuit breakers", base: eds, edit: maxRequests(corev3.RoutingPriority_DEFAULT, 0)},
		{name: "tls", base: eds, edit: func(c *clusterv3.Cluster) {
			c.TransportSocket = tlsSocket(upstreamTLS("x"))
		}},
		{name: "transport socket of another name", base: eds, edit: func(c *clusterv3.Cluster) {
			c.TransportSocket = tlsSocket(upstreamTLS("x"))
			c.TransportSocket.Name = "tls"
		}, wantErr: `transport_socket.name: "tls" is not supported (want "envoy.transport_sockets.tls")`},
		{name: "transport socket of another type", base: eds, edit: func(c *clusterv3.Cluster) {
			c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
				TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer"}}}
		}, wantErr: "transport_socket.typed_config: holds envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer, want " + upstreamTLSName},
		{name: "transport socket without config", base: eds, edit: func(c *clusterv3.Cluster) {
			c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls"}
		}, wantErr: "transport_socket.typed_config: holds (empty type_url)"},
		{name: "tls garbage", base: eds, edit: func(c *clusterv3.Cluster) {
			c.TransportSocket = tlsSocket(&tlsv3.UpstreamTlsContext{})
			c.TransportSocket.GetTypedConfig().Value = []byte{0x0a, 0x05}
		}, wantErr: "transport_socket.typed_config: unmarshal UpstreamTlsContext"},
		{name: "transport socket matches", base: eds, edit: func(c *clusterv3.Cluster) {
			c.TransportSocketMatches = []*clusterv3.Cluster_TransportSocketMatch{{Name: "m"}}
		}, wantErr: "transport_socket_matches: not supported"},
		{name: "lrs self", base: eds, edit: func(c *clusterv3.Cluster) { c.LrsServer = selfSource() }},
		{name: "lrs ads", base: eds, edit: func(c *clusterv3.Cluster) { c.LrsServer = adsSource() },
			wantErr: `lrs_server: unsupported config source "ads" (want self)`},
		{name: "lrs empty", base: eds, edit: func(c *clusterv3.Cluster) { c.LrsServer = &corev3.ConfigSource{} },
			wantErr: `lrs_server: unsupported config source "" (want self)`},
		{name: "outlier detection", base: eds, edit: outlier(func(od *clusterv3.OutlierDetection) {
			od.Interval = durationpb.New(time.Second)
			od.MaxEjectionPercent = wrapperspb.UInt32(100)
		})},
		{name: "outlier negative interval", base: eds, edit: outlier(func(od *clusterv3.OutlierDetection) {
			od.Interval = durationpb.New(-time.Second)
		}), wantErr: "outlier_detection.interval: must not be negative"},
		{name: "outlier invalid ejection time", base: eds, edit: outlier(func(od *clusterv3.OutlierDetection) {
			od.BaseEjectionTime = &durationpb.Duration{Seconds: 1, Nanos: -1}
		}), wantErr: "outlier_detection.base_ejection_time: invalid duration"},
		{name: "outlier percent above 100", base: eds, edit: outlier(func(od *clusterv3.OutlierDetection) {
			od.EnforcingFailurePercentage = wrapperspb.UInt32(101)
		}), wantErr: "outlier_detection.enforcing_failure_percentage: must be at most 100, got 101"},
		// Envoy's consecutive detectors (HTTP only): not judged, as
		// grpc-go does not judge them, even past the proto's bound of
		// 100 on the enforcing percentages.
		{name: "outlier consecutive", base: eds, edit: outlier(func(od *clusterv3.OutlierDetection) {
			od.Consecutive_5Xx = wrapperspb.UInt32(1 << 31)
			od.ConsecutiveGatewayFailure = wrapperspb.UInt32(0)
			od.EnforcingConsecutive_5Xx = wrapperspb.UInt32(100)
			od.EnforcingConsecutiveGatewayFailure = wrapperspb.UInt32(0)
		})},
		{name: "outlier enforcing consecutive 5xx above 100", base: eds, edit: outlier(func(od *clusterv3.OutlierDetection) {
			od.EnforcingConsecutive_5Xx = wrapperspb.UInt32(101)
		})},
		{name: "outlier enforcing consecutive gateway failure above 100", base: eds, edit: outlier(func(od *clusterv3.OutlierDetection) {
			od.EnforcingConsecutiveGatewayFailure = wrapperspb.UInt32(200)
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.base()
			if tt.edit != nil {
				tt.edit(in)
			}
			name, v, err := decodeMsg(ClusterType, in)
			checkErr(t, err, tt.wantErr)
			if name != in.GetName() {
				t.Errorf("name = %q, want %q", name, in.GetName())
			}
			if err == nil && (v.Name != in.GetName() || v.Raw() == nil) {
				t.Errorf("value %+v does not reflect the input", v)
			}
		})
	}
}

func ringHash(hf clusterv3.Cluster_RingHashLbConfig_HashFunction, minSize, maxSize uint64) func(c *clusterv3.Cluster) {
	return func(c *clusterv3.Cluster) {
		c.LbPolicy = clusterv3.Cluster_RING_HASH
		cfg := &clusterv3.Cluster_RingHashLbConfig{HashFunction: hf, MinimumRingSize: wrapperspb.UInt64(minSize)}
		if maxSize != 0 {
			cfg.MaximumRingSize = wrapperspb.UInt64(maxSize)
		}
		c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: cfg}
	}
}

func leastRequest(n uint32) func(c *clusterv3.Cluster) {
	return func(c *clusterv3.Cluster) {
		c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
		c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{
			ChoiceCount: wrapperspb.UInt32(n),
		}}
	}
}

func maxRequests(p corev3.RoutingPriority, n uint32) func(c *clusterv3.Cluster) {
	return func(c *clusterv3.Cluster) {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{
			{Priority: p, MaxRequests: wrapperspb.UInt32(n)},
		}}
	}
}

func outlier(edit func(od *clusterv3.OutlierDetection)) func(c *clusterv3.Cluster) {
	return func(c *clusterv3.Cluster) {
		c.OutlierDetection = &clusterv3.OutlierDetection{}
		edit(c.OutlierDetection)
	}
}

func TestDecodeClusterValues(t *testing.T) {
	decode := func(in *clusterv3.Cluster) *Cluster {
		t.Helper()
		_, c, err := decodeMsg(ClusterType, in)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	c := decode(edsCluster("c", ""))
	if c.Kind != ClusterKindEDS || c.ServiceName != "" || c.EDSServiceName() != "c" || c.MaxRequests != 1024 ||
		c.MaxPendingRequests != 1024 || c.MaxConnections != 1024 || c.LBPolicy != (LBPolicy{Kind: LBRoundRobin, WRRLocality: true}) || c.TLS != nil || c.LRSServerSelf || c.OutlierDetection != nil {
		t.Errorf("plain EDS cluster = %+v", c)
	}
	if c.ResourceName() != "c" || !proto.Equal(c.Proto(), c.Raw()) {
		t.Error("ResourceName/Proto do not reflect the value")
	}
	in := edsCluster("c", "svc")
	maxRequests(corev3.RoutingPriority_HIGH, 5)(in)
	in.CircuitBreakers.Thresholds = append(in.CircuitBreakers.Thresholds,
		&clusterv3.CircuitBreakers_Thresholds{Priority: corev3.RoutingPriority_DEFAULT, MaxRequests: wrapperspb.UInt32(7),
			MaxPendingRequests: wrapperspb.UInt32(0), MaxConnections: wrapperspb.UInt32(3)},
		&clusterv3.CircuitBreakers_Thresholds{Priority: corev3.RoutingPriority_DEFAULT, MaxConnections: wrapperspb.UInt32(9)})
	in.TransportSocket = tlsSocket(upstreamTLS("svc.example"))
	in.LrsServer = selfSource()
	in.OutlierDetection = &clusterv3.OutlierDetection{MaxEjectionPercent: wrapperspb.UInt32(20)}
	c = decode(in)
	if c.EDSServiceName() != "svc" || c.ServiceName != "svc" || c.MaxRequests != 7 || c.MaxPendingRequests != 0 || c.MaxConnections != 3 || c.TLS.GetSni() != "svc.example" ||
		!c.LRSServerSelf || c.OutlierDetection.GetMaxEjectionPercent().GetValue() != 20 {
		t.Errorf("full EDS cluster = %+v", c)
	}
	in = edsCluster("c", "")
	in.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{}}}
	if c = decode(in); c.MaxRequests != 1024 || c.MaxPendingRequests != 1024 || c.MaxConnections != 1024 {
		t.Errorf("DEFAULT threshold without limits: MaxRequests, MaxPendingRequests, MaxConnections = %d, %d, %d, want 1024 each",
			c.MaxRequests, c.MaxPendingRequests, c.MaxConnections)
	}

	c = decode(dnsCluster("d", "dns.example.com", 8080))
	if c.Kind != ClusterKindLogicalDNS || c.DNSHost != "dns.example.com" || c.DNSPort != 8080 {
		t.Errorf("LOGICAL_DNS cluster = %+v", c)
	}
	c = decode(aggregateCluster("a", "p0", "p1", "p0"))
	if c.Kind != ClusterKindAggregate || !reflect.DeepEqual(c.AggregateChildren, []string{"p0", "p1", "p0"}) {
		t.Errorf("aggregate cluster = %+v", c)
	}

	in = edsCluster("c", "")
	ringHash(clusterv3.Cluster_RingHashLbConfig_XX_HASH, 10, 0)(in)
	if got, want := decode(in).LBPolicy, (LBPolicy{Kind: LBRingHash, MinRingSize: 10, MaxRingSize: DefaultMaxRingSize}); got != want {
		t.Errorf("ring hash = %+v, want %+v", got, want)
	}
	in.LbConfig = nil
	if got, want := decode(in).LBPolicy, (LBPolicy{Kind: LBRingHash, MinRingSize: 1024, MaxRingSize: 8 << 20}); got != want {
		t.Errorf("ring hash defaults = %+v, want %+v", got, want)
	}
	leastRequest(5)(in)
	if got, want := decode(in).LBPolicy, (LBPolicy{Kind: LBLeastRequest, ChoiceCount: 5}); got != want {
		t.Errorf("least request = %+v, want %+v", got, want)
	}
	in.LbConfig = nil
	if got := decode(in).LBPolicy.ChoiceCount; got != 2 {
		t.Errorf("least request default choice count = %d", got)
	}

	for k, want := range map[ClusterKind]string{ClusterKindEDS: "EDS", ClusterKindLogicalDNS: "LOGICAL_DNS", ClusterKindAggregate: "AGGREGATE", 5: "ClusterKind(5)"} {
		if k.String() != want {
			t.Errorf("String() = %q, want %q", k.String(), want)
		}
	}
}

func TestDecodeClusterGarbage(t *testing.T) {
	_, _, err := ClusterType.DecodeTyped(nil, &anypb.Any{TypeUrl: ClusterTypeURL, Value: []byte{0xff, 0xff}})
	checkErr(t, err, "Cluster: unmarshal Cluster")
}
