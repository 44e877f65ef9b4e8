package grpcparity

import (
	"context"
	"os"
	"os/exec"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	http11proxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/http_11_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// grpc-go reads HTTP CONNECT configuration (gRFC A86) only when this is
// "true" when it starts; goxds always reads it.
const httpConnectEnv = "GRPC_EXPERIMENTAL_XDS_HTTP_CONNECT"

// TestHTTPConnectVerdicts compares goxds's verdicts on http_11_proxy
// clusters and on proxy address metadata with grpc-go's. grpc-go reads its
// switch once, at init, so the comparison runs in a child process of this
// test binary started with the switch on.
func TestHTTPConnectVerdicts(t *testing.T) {
	if os.Getenv(httpConnectEnv) != "true" {
		ctx, cancel := context.WithTimeout(context.Background(), 4*verdictTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHTTPConnectVerdicts$", "-test.v")
		cmd.Env = append(os.Environ(), httpConnectEnv+"=true")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("with %s=true: %v\n%s", httpConnectEnv, err, out)
		}
		t.Logf("with %s=true:\n%s", httpConnectEnv, out)
		return
	}
	t.Run("clusters", testHTTPConnectClusterVerdicts)
	t.Run("endpoints", testHTTPConnectEndpointVerdicts)
}

func proxied(name string, inner *corev3.TransportSocket) *clusterv3.Cluster {
	c := testutils.Cluster("c", "")
	c.TransportSocket = &corev3.TransportSocket{Name: name, ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: toAny(&http11proxyv3.Http11ProxyUpstreamTransport{TransportSocket: inner})}}
	return c
}

func tlsInner(name string, m *anypb.Any) *corev3.TransportSocket {
	return &corev3.TransportSocket{Name: name, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: m}}
}

func testHTTPConnectClusterVerdicts(t *testing.T) {
	goodTLS := toAny(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "roots"},
		}},
	}})
	const name = "envoy.transport_sockets.http_11_proxy"
	tests := []struct {
		name    string
		c       *clusterv3.Cluster
		differs string
	}{
		{name: "plaintext inside", c: proxied(name, nil)},
		{
			name: "TLS inside", c: proxied(name, tlsInner("envoy.transport_sockets.tls", goodTLS)),
			differs: "grpc-go NACKs a certificate provider instance its bootstrap lacks (the parity bootstrap has none); " +
				"goxds accepts the cluster and fails its RPCs (TestClusterTLSUndefinedInstance)",
		},
		{name: "any outer name", c: proxied("whatever", nil)},
		{name: "inner of another name", c: proxied(name, tlsInner("raw_buffer", goodTLS))},
		{name: "inner of another type", c: proxied(name, tlsInner("envoy.transport_sockets.tls", toAny(&structpb.Struct{})))},
		{name: "inner TLS without common context", c: proxied(name, tlsInner("envoy.transport_sockets.tls", toAny(&tlsv3.UpstreamTlsContext{})))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := resources.ClusterType.DecodeTyped(nil, toAny(tt.c))
			nack := grpcGoClusterVerdict(t, tt.c)
			t.Logf("goxds %v; grpc-go %q", err, nack)
			if tt.differs != "" {
				if (err != nil) == (nack != "") {
					t.Errorf("known difference gone: goxds %v, grpc-go %q; drop the note: %s", err, nack, tt.differs)
				}
				return
			}
			compare(t, err, nack)
		})
	}
}

func addressAny(host string, port uint32) *anypb.Any {
	return toAny(&corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}})
}

func testHTTPConnectEndpointVerdicts(t *testing.T) {
	key := resources.ProxyAddressMetadataKey
	withMD := func(onEndpoint bool, md map[string]*anypb.Any) *endpointv3.ClusterLoadAssignment {
		cla := testutils.Endpoints("c", []testutils.EndpointSpec{{Host: "127.0.0.1", Port: 8080}})
		m := &corev3.Metadata{TypedFilterMetadata: md}
		if onEndpoint {
			cla.Endpoints[0].LbEndpoints[0].Metadata = m
		} else {
			cla.Endpoints[0].Metadata = m
		}
		return cla
	}
	tests := []struct {
		name string
		cla  *endpointv3.ClusterLoadAssignment
	}{
		{"endpoint proxy", withMD(true, map[string]*anypb.Any{key: addressAny("10.0.0.1", 3128)})},
		{"locality proxy", withMD(false, map[string]*anypb.Any{key: addressAny("::1", 3128)})},
		{"endpoint proxy host name", withMD(true, map[string]*anypb.Any{key: addressAny("proxy.example", 3128)})},
		{"locality proxy without port", withMD(false, map[string]*anypb.Any{key: addressAny("10.0.0.1", 0)})},
		{"address under another key", withMD(true, map[string]*anypb.Any{"other": addressAny("proxy.example", 3128)})},
		{"no socket address", withMD(true, map[string]*anypb.Any{key: toAny(&corev3.Address{})})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := resources.EndpointsType.DecodeTyped(nil, toAny(tt.cla))
			nack := grpcGoEndpointsVerdict(t, proxied("envoy.transport_sockets.http_11_proxy", nil), tt.cla)
			t.Logf("goxds %v; grpc-go %q", err, nack)
			compare(t, err, nack)
		})
	}
}

// grpcGoEndpointsVerdict serves grpc-go's xDS client a listener, a route
// configuration to cluster c, c and then cla, and returns the
// error_detail of its reply to cla: "" for an ACK.
func grpcGoEndpointsVerdict(t *testing.T, c *clusterv3.Cluster, cla *endpointv3.ClusterLoadAssignment) string {
	t.Helper()
	ctx, s := grpcGoClient(t)
	grpcGoRoutesToCluster(ctx, t, s)
	if nack := exchange(ctx, t, s, resources.ClusterTypeURL, c.GetName(), c); nack != "" {
		t.Fatalf("grpc-go rejected the cluster: %s", nack)
	}
	return exchange(ctx, t, s, resources.EndpointsTypeURL, cla.GetClusterName(), cla)
}
