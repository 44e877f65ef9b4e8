package grpcxds_test

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/testutils"
)

// startConnectProxy starts a testutils.ConnectProxy, stopped when the
// test ends.
func startConnectProxy(t *testing.T) *testutils.ConnectProxy {
	t.Helper()
	p, err := testutils.StartConnectProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// A cluster whose transport socket is http_11_proxy reaches its endpoint
// through the proxy its metadata names (gRFC A86): every connection the
// backend accepts is a tunnel of the proxy's, to the backend's address.
func TestHTTPConnectThroughProxy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	proxy := startConnectProxy(t)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{testutils.HTTP11ProxyCluster(clusters("A")[0])}, testutils.ViaProxy(eds("A", a), proxy.Port())))
	conn := e.dial()
	e.waitServed(conn, 10, func(name string) bool { return name == "a" })
	tunnels, accepted := proxy.Tunnels(), a.conns.Load()
	if tunnels == 0 || tunnels != accepted {
		t.Fatalf("the proxy opened %d tunnels, the backend accepted %d connections: want the same, at least one", tunnels, accepted)
	}
	for _, target := range proxy.Targets() {
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
	proxy.SetRefuse(true)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{testutils.HTTP11ProxyCluster(clusters("A")[0])}, testutils.ViaProxy(eds("A", a), proxy.Port())))
	conn := e.dial()
	err := e.waitFailing(conn)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "403 Forbidden") ||
		!strings.Contains(err.Error(), proxy.Addr()) {
		t.Fatalf("RPC error %v, want UNAVAILABLE naming the proxy %s and its 403 Forbidden", err, proxy.Addr())
	}
	if n := a.conns.Load(); n != 0 || proxy.Refused() == 0 {
		t.Fatalf("backend accepted %d connections, proxy refused %d: want 0 and some", n, proxy.Refused())
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
	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{testutils.HTTP11ProxyCluster(clusters("A")[0])}, testutils.ViaProxy(eds("A", a), proxy.Port())))
	conn, err := grpc.NewClient("goxds:///"+listener, grpc.WithResolvers(e.builder), grpc.WithTransportCredentials(insecure.NewCredentials()), fastConnect)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = e.waitFailing(conn)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "HTTP CONNECT proxy "+proxy.Addr()) ||
		!strings.Contains(err.Error(), "DialOptions") {
		t.Fatalf("RPC error %v, want UNAVAILABLE naming the proxy and the dial options", err)
	}
	if a.conns.Load() != 0 || proxy.Tunnels() != 0 {
		t.Fatalf("backend accepted %d connections, proxy tunnelled %d: want none", a.conns.Load(), proxy.Tunnels())
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
	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{testutils.HTTP11ProxyCluster(c)}, testutils.ViaProxy(eds("A", a.backend), proxy.Port())))
	conn := e.dial(xdsCreds(t))
	e.waitServed(conn, 5, func(name string) bool { return name == "a" })
	a.waitSerial(e.ctx, t, m.client.Serial)
	if tunnels, accepted := proxy.Tunnels(), a.conns.Load(); tunnels == 0 || tunnels != accepted {
		t.Fatalf("the proxy opened %d tunnels, the backend accepted %d connections: want the same, at least one", tunnels, accepted)
	}
	if p := a.plaintext.Load(); p != 0 {
		t.Fatalf("the backend saw %d plaintext connections", p)
	}
}
