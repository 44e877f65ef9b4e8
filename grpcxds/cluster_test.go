package grpcxds_test

import (
	"net"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/grpc"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// An aggregate cluster uses its first leaf with a usable endpoint: here an
// EDS cluster whose only endpoint is unhealthy is passed over for a
// LOGICAL_DNS cluster resolved through gRPC's DNS resolver, until the EDS
// endpoint is healthy again. The same when the cluster waits for its first
// RPC to be built and connected.
func TestAggregateWithLogicalDNS(t *testing.T) {
	t.Parallel()
	forConnectModes(t, testAggregateWithLogicalDNS)
}

func testAggregateWithLogicalDNS(t *testing.T, opts grpcxds.Options) {
	e := newEnvWith(t, opts)
	primary, dns := startBackend(t, "primary"), startBackend(t, "dns")
	cla := func(health corev3.HealthStatus) *endpointv3.ClusterLoadAssignment {
		return testutils.Endpoints("primary", []testutils.EndpointSpec{{Host: "127.0.0.1", Port: primary.port, Health: health}})
	}
	res := tree(routes(toCluster(prefix("/"), "agg")), []*clusterv3.Cluster{
		testutils.AggregateCluster("agg", "primary", "legacy"),
		testutils.Cluster("primary", ""),
		testutils.LogicalDNSCluster("legacy", "localhost", dns.port),
	}, cla(corev3.HealthStatus_UNHEALTHY))
	e.update(res)
	conn := e.dial()
	is := func(want string) func(string) bool { return func(got string) bool { return got == want } }
	e.waitServed(conn, 20, is("dns"))
	res.Endpoints[0] = cla(corev3.HealthStatus_HEALTHY)
	e.update(res)
	e.waitServed(conn, 20, is("primary"))
}

// A LOGICAL_DNS cluster named by a route directly works too, with an IP
// address for a name.
func TestLogicalDNSCluster(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "dns")),
		[]*clusterv3.Cluster{testutils.LogicalDNSCluster("dns", "127.0.0.1", a.port)}))
	conn := e.dial()
	e.waitServed(conn, 5, func(name string) bool { return name == "a" })
}

// A priority that stays connecting is given up after the failover
// timeout: here its endpoint accepts connections and never answers, and
// the channel's connect timeout is far longer than the test. On first RPC,
// the timer starts when the cluster wakes.
func TestFailoverTimeout(t *testing.T) {
	t.Parallel()
	forConnectModes(t, testFailoverTimeout)
}

func testFailoverTimeout(t *testing.T, opts grpcxds.Options) {
	opts.FailoverTimeout = 100 * time.Millisecond
	e := newEnvWith(t, opts)
	silent := blackHole(t)
	p1 := startBackend(t, "p1")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), testutils.Endpoints("A", []testutils.EndpointSpec{
		{Host: "127.0.0.1", Port: silent, Locality: testutils.Locality{Zone: "z0"}},
		{Host: "127.0.0.1", Port: p1.port, Locality: testutils.Locality{Zone: "z1"}, Priority: 1},
	})))
	conn := e.dial(grpc.WithConnectParams(grpc.ConnectParams{Backoff: fastBackoff, MinConnectTimeout: time.Minute}))
	e.waitServed(conn, 5, func(name string) bool { return name == "p1" })
}

// blackHole returns the port of a listener that accepts connections and
// never says a word: a gRPC connection to it stays CONNECTING until the
// channel's connect timeout.
func blackHole(t *testing.T) uint32 {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return uint32(lis.Addr().(*net.TCPAddr).Port)
}
