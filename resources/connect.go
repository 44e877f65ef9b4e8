package resources

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	http11proxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/http_11_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// HTTP CONNECT (gRFC A86). A cluster opts in by wrapping its transport
// socket in an Http11ProxyUpstreamTransport; each endpoint then names the
// proxy it is reached through in its metadata (or its locality's). grpc-go
// reads these only when GRPC_EXPERIMENTAL_XDS_HTTP_CONNECT is set; goxds
// always does, so a control plane that configures proxies is obeyed rather
// than bypassed.

const (
	http11ProxyName = "envoy.extensions.transport_sockets.http_11_proxy.v3.Http11ProxyUpstreamTransport"
	addressName     = "envoy.config.core.v3.Address"

	// ProxyAddressMetadataKey is the typed_filter_metadata key of an
	// endpoint's (or locality's) HTTP CONNECT proxy address (gRFC A86).
	ProxyAddressMetadataKey = "envoy.http11_proxy_transport_socket.proxy_address"
)

// unwrapHTTP11Proxy returns the transport socket inside an
// Http11ProxyUpstreamTransport, and whether ts was one. As in grpc-go the
// wrapper is recognised by its type, whatever the socket's name; a wrapper
// with no inner socket means plaintext through the proxy.
func unwrapHTTP11Proxy(ts *corev3.TransportSocket) (*corev3.TransportSocket, bool, error) {
	if !anyIs(ts.GetTypedConfig(), http11ProxyName) {
		return ts, false, nil
	}
	w := new(http11proxyv3.Http11ProxyUpstreamTransport)
	if err := proto.Unmarshal(ts.GetTypedConfig().GetValue(), w); err != nil {
		return nil, true, fieldErrorf("transport_socket.typed_config", "unmarshal Http11ProxyUpstreamTransport: %v", err)
	}
	return w.GetTransportSocket(), true, nil
}

// proxyAddressOf validates the envoy.config.core.v3.Address entries of md's
// typed_filter_metadata and returns the proxy address under
// ProxyAddressMetadataKey ("" if none). Like grpc-go, every Address entry
// is validated whatever its key, and an invalid one rejects the resource:
// the proxy must be an IP address (no name to resolve) with a port.
func proxyAddressOf(md *corev3.Metadata) (string, error) {
	var proxy string
	for key, a := range md.GetTypedFilterMetadata() {
		if !anyIs(a, addressName) {
			continue
		}
		s, err := proxyAddress(a)
		if err != nil {
			return "", at("metadata.typed_filter_metadata["+strconv.Quote(key)+"]", err)
		}
		if key == ProxyAddressMetadataKey {
			proxy = s
		}
	}
	return proxy, nil
}

func proxyAddress(a *anypb.Any) (string, error) {
	m := new(corev3.Address)
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		return "", fmt.Errorf("unmarshal Address: %v", err)
	}
	sa := m.GetSocketAddress()
	if sa == nil {
		return "", fieldErrorf("socket_address", "missing")
	}
	ip, err := netip.ParseAddr(sa.GetAddress())
	if err != nil {
		return "", fieldErrorf("socket_address.address", "%q is not an IP address", sa.GetAddress())
	}
	if sa.GetPortValue() == 0 || sa.GetPortValue() > 65535 {
		return "", fieldErrorf("socket_address.port_value", "%d is not a valid port", sa.GetPortValue())
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(uint64(sa.GetPortValue()), 10)), nil
}
