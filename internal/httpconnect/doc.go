// Package httpconnect dials TCP connections through HTTP/1.1 CONNECT
// proxies: the tunnels of gRFC A86 (a cluster whose transport socket is
// envoy.transport_sockets.http_11_proxy, each endpoint naming its proxy in
// its metadata) and the proxy the environment names (HTTPS_PROXY,
// NO_PROXY), which grpc-go's own dialer honours and a custom dialer must
// honour in its place.
//
// It is shared by the adapters that open connections to endpoints:
// grpcxds's dialer (grpcxds.ConnectDialer) and httpxds's HTTP client. Its
// home is here rather than beside the data plane because it speaks HTTP
// through net/http, which nothing under dataplane/ may import
// (internal/importcheck's TestDataPlaneImportsNoTransport), and rather than
// in either adapter because neither may import the other. The proxy's
// address itself is decoded and validated with the endpoint, by package
// resources (Endpoint.ProxyAddress), and handed to the transport with the
// endpoint by dataplane/cluster (EndpointSpec.Proxy): what remains for a
// transport is the dial, which is this package.
//
// Addresses. A gRPC channel lets a library act on a new connection only
// through its dialer, which sees nothing of the address but a string, so
// a transport that must tell its dialer "through this proxy" writes the
// instruction into the address: Addr(proxy, target). Dialer recognises
// such an address and tunnels; any other goes to its base dialer. A
// transport that dials per endpoint (an HTTP client's DialContext for one
// endpoint) calls DialThrough with the proxy instead.
package httpconnect
