package grpcxds_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	http11proxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/http_11_proxy/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/resources"
)

// connectProxy is an HTTP/1.1 CONNECT proxy on 127.0.0.1 that counts its
// tunnels and refuses them with 403 while refuse is set.
type connectProxy struct {
	lis     net.Listener
	addr    string
	port    uint32
	refuse  atomic.Bool
	tunnels atomic.Int64
	refused atomic.Int64

	mu      sync.Mutex
	targets []string
	conns   []net.Conn
	wg      sync.WaitGroup
}

func startConnectProxy(t *testing.T) *connectProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{lis: lis, addr: lis.Addr().String(), port: uint32(lis.Addr().(*net.TCPAddr).Port)}
	p.wg.Add(1)
	go p.serve(lis)
	t.Cleanup(p.stop)
	return p
}

// serve accepts on lis, which it is handed rather than reading p.lis: stop
// clears that under p.mu, perhaps before serve has started.
func (p *connectProxy) serve(lis net.Listener) {
	defer p.wg.Done()
	for {
		c, err := lis.Accept()
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

// track records c, to be closed by stop; false once stopped.
func (p *connectProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil && p.lis == nil {
		c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *connectProxy) handle(c net.Conn) {
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

func (p *connectProxy) stop() {
	p.lis.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns, p.lis = nil, nil
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *connectProxy) tunnelTargets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

// proxiedCluster wraps cluster c's transport socket (plaintext) in an
// Http11ProxyUpstreamTransport.
func proxiedCluster(c *clusterv3.Cluster) *clusterv3.Cluster {
	w, err := anypb.New(&http11proxyv3.Http11ProxyUpstreamTransport{})
	if err != nil {
		panic(err)
	}
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.http_11_proxy",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: w}}
	return c
}

// viaProxy names p in the metadata of every endpoint of cla.
func viaProxy(cla *endpointv3.ClusterLoadAssignment, p *connectProxy) *endpointv3.ClusterLoadAssignment {
	a, err := anypb.New(&corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p.port}}}})
	if err != nil {
		panic(err)
	}
	for _, loc := range cla.GetEndpoints() {
		for _, lbe := range loc.GetLbEndpoints() {
			lbe.Metadata = &corev3.Metadata{TypedFilterMetadata: map[string]*anypb.Any{resources.ProxyAddressMetadataKey: a}}
		}
	}
	return cla
}

// A cluster whose transport socket is http_11_proxy reaches its endpoint
// through the proxy its metadata names (gRFC A86): every connection the
// backend accepts is a tunnel of the proxy's, to the backend's address.
func TestHTTPConnectThroughProxy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	proxy := startConnectProxy(t)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{proxiedCluster(clusters("A")[0])}, viaProxy(eds("A", a), proxy)))
	conn := e.dial()
	e.waitServed(conn, 10, func(name string) bool { return name == "a" })
	tunnels, accepted := proxy.tunnels.Load(), a.conns.Load()
	if tunnels == 0 || tunnels != accepted {
		t.Fatalf("the proxy opened %d tunnels, the backend accepted %d connections: want the same, at least one", tunnels, accepted)
	}
	for _, target := range proxy.tunnelTargets() {
		if target != a.addr {
			t.Fatalf("tunnel to %q, want only %q", target, a.addr)
		}
	}
	t.Logf("%d tunnel(s), %d backend connection(s)", tunnels, accepted)
}

// A proxy refusing the tunnel fails the RPCs with its answer; the backend
// is never reached around it.
func TestHTTPConnectProxyRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	proxy := startConnectProxy(t)
	proxy.refuse.Store(true)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{proxiedCluster(clusters("A")[0])}, viaProxy(eds("A", a), proxy)))
	conn := e.dial()
	err := e.waitFailing(conn)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "403 Forbidden") ||
		!strings.Contains(err.Error(), proxy.addr) {
		t.Fatalf("RPC error %v, want UNAVAILABLE naming the proxy %s and its 403 Forbidden", err, proxy.addr)
	}
	if n := a.conns.Load(); n != 0 || proxy.refused.Load() == 0 {
		t.Fatalf("backend accepted %d connections, proxy refused %d: want 0 and some", n, proxy.refused.Load())
	}
}

// A channel without the goxds dial options has no dialer that can tunnel:
// RPCs to a proxied cluster fail saying so, and nothing connects around
// the proxy.
func TestHTTPConnectNeedsDialOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	proxy := startConnectProxy(t)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{proxiedCluster(clusters("A")[0])}, viaProxy(eds("A", a), proxy)))
	conn, err := grpc.NewClient("goxds:///"+listener, grpc.WithResolvers(e.builder), grpc.WithTransportCredentials(insecure.NewCredentials()), fastConnect)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = e.waitFailing(conn)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "HTTP CONNECT proxy "+proxy.addr) ||
		!strings.Contains(err.Error(), "DialOptions") {
		t.Fatalf("RPC error %v, want UNAVAILABLE naming the proxy and the dial options", err)
	}
	if a.conns.Load() != 0 || proxy.tunnels.Load() != 0 {
		t.Fatalf("backend accepted %d connections, proxy tunnelled %d: want none", a.conns.Load(), proxy.tunnels.Load())
	}
}

// An http_11_proxy cluster with TLS inside: the tunnel carries mTLS from
// the client to the backend (xdscreds handshakes over it), never
// plaintext, and the proxy sees only the tunnels.
func TestHTTPConnectTLSOverTunnel(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	e := newSecureEnv(t, m)
	proxy := startConnectProxy(t)
	a := startTLSBackend(t, "a", m, 0)
	c := secureCluster(t, "A", "id", "roots", exactSAN(serverSPIFFE))
	w, err := anypb.New(&http11proxyv3.Http11ProxyUpstreamTransport{TransportSocket: c.TransportSocket})
	if err != nil {
		t.Fatal(err)
	}
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.http_11_proxy",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: w}}
	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{c}, viaProxy(eds("A", a.backend), proxy)))
	conn := e.dial(xdsCreds(t))
	e.waitServed(conn, 5, func(name string) bool { return name == "a" })
	a.waitSerial(e.ctx, t, m.client.Serial)
	if tunnels, accepted := proxy.tunnels.Load(), a.conns.Load(); tunnels == 0 || tunnels != accepted {
		t.Fatalf("the proxy opened %d tunnels, the backend accepted %d connections: want the same, at least one", tunnels, accepted)
	}
	if p := a.plaintext.Load(); p != 0 {
		t.Fatalf("the backend saw %d plaintext connections", p)
	}
}
