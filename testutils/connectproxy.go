package testutils

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	http11proxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/http_11_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// ConnectProxy is an HTTP/1.1 CONNECT proxy on 127.0.0.1 (gRFC A86's
// proxies, for the clients that tunnel through them): it tunnels to the
// address each CONNECT names, counts its tunnels, and refuses them with
// 403 Forbidden while SetRefuse(true) holds.
type ConnectProxy struct {
	lis     net.Listener
	addr    string
	port    uint32
	refuse  atomic.Bool
	tunnels atomic.Int64
	refused atomic.Int64
	wg      sync.WaitGroup

	mu      sync.Mutex
	targets []string   // guarded by mu
	conns   []net.Conn // both sides of every tunnel, closed by Stop; guarded by mu
	stopped bool       // guarded by mu
}

// StartConnectProxy starts a ConnectProxy. Stop it when done.
func StartConnectProxy() (*ConnectProxy, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &ConnectProxy{lis: lis, addr: lis.Addr().String(), port: uint32(lis.Addr().(*net.TCPAddr).Port)}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's address, "127.0.0.1:port".
func (p *ConnectProxy) Addr() string { return p.addr }

// Port is the proxy's port.
func (p *ConnectProxy) Port() uint32 { return p.port }

// SetRefuse makes the proxy refuse every CONNECT from now on (403), or
// tunnel again.
func (p *ConnectProxy) SetRefuse(refuse bool) { p.refuse.Store(refuse) }

// Tunnels is how many tunnels the proxy opened.
func (p *ConnectProxy) Tunnels() int64 { return p.tunnels.Load() }

// Refused is how many CONNECT requests it refused.
func (p *ConnectProxy) Refused() int64 { return p.refused.Load() }

// Targets are the addresses of the tunnels opened, in order.
func (p *ConnectProxy) Targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

// Stop closes the proxy and every tunnel, and waits for them.
func (p *ConnectProxy) Stop() {
	p.lis.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns, p.stopped = nil, true
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *ConnectProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
		}()
	}
}

// track records c, to be closed by Stop; false (c closed) once stopped.
func (p *ConnectProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *ConnectProxy) handle(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\n\r\n")
		return
	}
	if p.refuse.Load() {
		p.refused.Add(1)
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", req.Host)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	if !p.track(up) {
		return
	}
	defer up.Close()
	p.mu.Lock()
	p.targets = append(p.targets, req.Host)
	p.mu.Unlock()
	p.tunnels.Add(1)
	if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(up, br) // br first: bytes the client sent after its request
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, up)
	c.Close()
	up.Close()
	<-done
}

// ProxyAddressMetadataKey is the typed_filter_metadata key under which an
// endpoint (or locality) names its HTTP CONNECT proxy (gRFC A86).
const ProxyAddressMetadataKey = "envoy.http11_proxy_transport_socket.proxy_address"

// HTTP11ProxyCluster wraps c's transport socket (none: plaintext) in an
// Http11ProxyUpstreamTransport, so that its endpoints whose metadata names
// a proxy are reached through it (gRFC A86), and returns c.
func HTTP11ProxyCluster(c *clusterv3.Cluster) *clusterv3.Cluster {
	w := MarshalAny(&http11proxyv3.Http11ProxyUpstreamTransport{TransportSocket: c.TransportSocket})
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.http_11_proxy",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: w}}
	return c
}

// ViaProxy names the proxy at 127.0.0.1:port in the metadata of every
// endpoint of cla, and returns cla.
func ViaProxy(cla *endpointv3.ClusterLoadAssignment, port uint32) *endpointv3.ClusterLoadAssignment {
	a := MarshalAny(socketAddress("127.0.0.1", port))
	for _, loc := range cla.GetEndpoints() {
		for _, lbe := range loc.GetLbEndpoints() {
			lbe.Metadata = &corev3.Metadata{TypedFilterMetadata: map[string]*anypb.Any{ProxyAddressMetadataKey: a}}
		}
	}
	return cla
}
