package resources

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	http11proxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/http_11_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// proxySocket wraps inner (nil: none) in an Http11ProxyUpstreamTransport.
func proxySocket(name string, inner *corev3.TransportSocket) *corev3.TransportSocket {
	return &corev3.TransportSocket{
		Name: name,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: toAny(
			&http11proxyv3.Http11ProxyUpstreamTransport{TransportSocket: inner})},
	}
}

// withMetadata sets md's typed_filter_metadata to entries.
func withMetadata(entries map[string]*anypb.Any) *corev3.Metadata {
	return &corev3.Metadata{TypedFilterMetadata: entries}
}

func TestDecodeClusterHTTP11Proxy(t *testing.T) {
	const proxyName = "envoy.transport_sockets.http_11_proxy"
	tests := []struct {
		name      string
		ts        *corev3.TransportSocket
		wantErr   string
		wantProxy bool
		wantTLS   bool
	}{
		{name: "no inner socket is plaintext through the proxy", ts: proxySocket(proxyName, nil), wantProxy: true},
		{name: "inner TLS", ts: proxySocket(proxyName, tlsSocket(upstreamTLS(""))), wantProxy: true, wantTLS: true},
		{name: "recognised by type whatever the name", ts: proxySocket("anything", nil), wantProxy: true},
		{name: "inner socket with another name", ts: proxySocket(proxyName, &corev3.TransportSocket{Name: "raw",
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: toAny(upstreamTLS(""))}}),
			wantErr: `transport_socket.typed_config.transport_socket.name: "raw" is not supported`},
		{name: "inner socket of another type", ts: proxySocket(proxyName, &corev3.TransportSocket{Name: tlsTransportSocketName,
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: toAny(&structpb.Struct{})}}),
			wantErr: "transport_socket.typed_config.transport_socket.typed_config: holds google.protobuf.Struct"},
		{name: "inner TLS invalid", ts: proxySocket(proxyName, tlsSocket(&tlsv3.UpstreamTlsContext{})),
			wantErr: "transport_socket.typed_config.transport_socket.typed_config.common_tls_context: missing"},
		{name: "garbage wrapper", ts: &corev3.TransportSocket{Name: proxyName, ConfigType: &corev3.TransportSocket_TypedConfig{
			TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/" + http11ProxyName, Value: []byte{0xff}}}},
			wantErr: "unmarshal Http11ProxyUpstreamTransport"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := edsCluster("c", "")
			m.TransportSocket = tc.ts
			_, c, err := decodeMsg(ClusterType, m)
			checkErr(t, err, tc.wantErr)
			if err != nil {
				return
			}
			if c.HTTP11Proxy != tc.wantProxy || (c.Security != nil) != tc.wantTLS {
				t.Fatalf("HTTP11Proxy %v, Security %v; want %v, TLS %v", c.HTTP11Proxy, c.Security, tc.wantProxy, tc.wantTLS)
			}
		})
	}
	// A plain cluster is not proxied.
	_, c, err := decodeMsg(ClusterType, &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: edsCluster("c", "").ClusterDiscoveryType,
		EdsClusterConfig: edsCluster("c", "").EdsClusterConfig})
	checkErr(t, err, "")
	if c.HTTP11Proxy {
		t.Fatal("plain cluster has HTTP11Proxy set")
	}
}

func TestDecodeEndpointsProxyAddress(t *testing.T) {
	addr := func(host string, port uint32) *anypb.Any { return toAny(socketAddr(host, port)) }
	epWith := func(md *corev3.Metadata) *endpointv3.LbEndpoint {
		e := lbEndpoint("10.0.0.1", 80)
		e.Metadata = md
		return e
	}
	locWith := func(md *corev3.Metadata, eps ...*endpointv3.LbEndpoint) *endpointv3.LocalityLbEndpoints {
		l := locality("r", 0, 1, eps...)
		l.Metadata = md
		return l
	}
	key := ProxyAddressMetadataKey
	tests := []struct {
		name    string
		loc     *endpointv3.LocalityLbEndpoints
		want    string // the endpoint's ProxyAddress
		wantLoc string
		wantErr string
	}{
		{name: "none", loc: locWith(nil, epWith(nil))},
		{name: "endpoint's", loc: locWith(nil, epWith(withMetadata(map[string]*anypb.Any{key: addr("10.1.1.1", 3128)}))), want: "10.1.1.1:3128"},
		{name: "locality's", loc: locWith(withMetadata(map[string]*anypb.Any{key: addr("10.2.2.2", 8080)}), epWith(nil)),
			want: "10.2.2.2:8080", wantLoc: "10.2.2.2:8080"},
		{name: "endpoint's wins", loc: locWith(withMetadata(map[string]*anypb.Any{key: addr("10.2.2.2", 8080)}),
			epWith(withMetadata(map[string]*anypb.Any{key: addr("::1", 3128)}))), want: "[::1]:3128", wantLoc: "10.2.2.2:8080"},
		{name: "another key is validated but unused", loc: locWith(nil, epWith(withMetadata(map[string]*anypb.Any{"other": addr("10.1.1.1", 1)})))},
		{name: "host name", loc: locWith(nil, epWith(withMetadata(map[string]*anypb.Any{key: addr("proxy.example", 3128)}))),
			wantErr: `typed_filter_metadata["` + key + `"].socket_address.address: "proxy.example" is not an IP address`},
		{name: "invalid under another key", loc: locWith(nil, epWith(withMetadata(map[string]*anypb.Any{"other": addr("10.1.1.1", 0)}))),
			wantErr: `typed_filter_metadata["other"].socket_address.port_value: 0 is not a valid port`},
		{name: "no socket address", loc: locWith(withMetadata(map[string]*anypb.Any{key: toAny(&corev3.Address{})}), epWith(nil)),
			wantErr: "endpoints[0].metadata.typed_filter_metadata[\"" + key + "\"].socket_address: missing"},
		{name: "other types ignored", loc: locWith(nil, epWith(withMetadata(map[string]*anypb.Any{key: toAny(&structpb.Struct{})})))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, e, err := decodeMsg(EndpointsType, cla("c", tc.loc))
			checkErr(t, err, tc.wantErr)
			if err != nil {
				return
			}
			loc := e.Localities[0]
			if loc.ProxyAddress != tc.wantLoc || loc.Endpoints[0].ProxyAddress != tc.want {
				t.Fatalf("locality proxy %q, endpoint proxy %q; want %q, %q", loc.ProxyAddress, loc.Endpoints[0].ProxyAddress, tc.wantLoc, tc.want)
			}
		})
	}
}
