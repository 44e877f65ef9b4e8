package grpcxds_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// fakeCC is a resolver.ClientConn that records what a resolver says.
type fakeCC struct {
	states chan resolver.State
	scJSON chan string
}

func newFakeCC() *fakeCC {
	return &fakeCC{states: make(chan resolver.State, 10), scJSON: make(chan string, 1)}
}

func (f *fakeCC) UpdateState(s resolver.State) error { f.states <- s; return nil }
func (f *fakeCC) ReportError(error)                  {}
func (f *fakeCC) NewAddress([]resolver.Address)      {}
func (f *fakeCC) ParseServiceConfig(js string) *serviceconfig.ParseResult {
	f.scJSON <- js
	return &serviceconfig.ParseResult{}
}

func (f *fakeCC) next(t *testing.T, ctx context.Context) resolver.State {
	t.Helper()
	select {
	case s := <-f.states:
		return s
	case <-ctx.Done():
		t.Fatal("no resolver state")
		return resolver.State{}
	}
}

func target(t *testing.T, s string) resolver.Target {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return resolver.Target{URL: *u}
}

// The resolver hands the channel the snapshot and a service config
// selecting the balancer; EndpointsFromState lists every EDS endpoint
// with its place in its cluster. State.Endpoints stays empty: made for
// every update, it cost every update all the endpoints.
func TestResolverState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cla := testutils.Endpoints("A", []testutils.EndpointSpec{
		{Host: "10.0.0.1", Port: 80, Locality: testutils.Locality{Region: "r", Zone: "z0"}, LocalityWeight: 7, Weight: 3},
		{Host: "10.0.0.2", Port: 80, Locality: testutils.Locality{Region: "r", Zone: "z1"}, Priority: 1, Health: corev3.HealthStatus_DRAINING},
	})
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), cla))
	cc := newFakeCC()
	r, err := e.builder.Build(target(t, "goxds:///"+listener), cc, resolver.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if js := <-cc.scJSON; !strings.Contains(js, `"`+grpcxds.BalancerName+`"`) {
		t.Errorf("service config %s does not select %s", js, grpcxds.BalancerName)
	}
	s := cc.next(t, e.ctx)
	snap, ok := grpcxds.SnapshotFromState(s)
	if !ok || snap.Listener.Name != listener || snap.Clusters.Get("A") == nil {
		t.Fatalf("SnapshotFromState = %v, %v; want the tree of %q", snap, ok, listener)
	}
	want := map[string]grpcxds.EndpointInfo{
		"10.0.0.1:80": {Cluster: "A", Locality: resources.LocalityID{Region: "r", Zone: "z0"}, LocalityWeight: 7, Weight: 3, Health: resources.HealthStatusUnknown},
		"10.0.0.2:80": {Cluster: "A", Locality: resources.LocalityID{Region: "r", Zone: "z1"}, Priority: 1, LocalityWeight: 1, Weight: 1, Health: resources.HealthStatusDraining},
	}
	if len(s.Endpoints) != 0 {
		t.Errorf("State.Endpoints holds %d endpoints, want none", len(s.Endpoints))
	}
	if eps := grpcxds.EndpointsFromState(resolver.State{}); eps != nil {
		t.Errorf("EndpointsFromState of a state without a snapshot: %d endpoints, want nil", len(eps))
	}
	eps := grpcxds.EndpointsFromState(s)
	if len(eps) != len(want) {
		t.Fatalf("EndpointsFromState: %d endpoints, want %d", len(eps), len(want))
	}
	for _, ep := range eps {
		info, ok := grpcxds.EndpointInfoFromEndpoint(ep)
		if addr := ep.Addresses[0].Addr; !ok || info != want[addr] {
			t.Errorf("endpoint %s: %+v, %v; want %+v", addr, info, ok, want[addr])
		}
	}
}

// Targets become listener names through the bootstrap's templates: the
// default one, and an authority's (gRFC A47).
func TestListenerNames(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Stop()
	const xdstpName = "xdstp://auth.example/envoy.config.listener.v3.Listener/greeter"
	a := startBackend(t, "a")
	res := tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a))
	rc := res.Routes[0].GetName()
	res.Listeners = []*listenerv3.Listener{testutils.Listener("svc-greeter", rc), testutils.Listener(xdstpName, rc)}
	if err := ms.Update(ctx, nodeID, res); err != nil {
		t.Fatal(err)
	}
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI:   ms.Address(),
		NodeID:      nodeID,
		Authorities: map[string]testutils.BootstrapAuthority{"auth.example": {}},
		ClientDefaultListenerResourceNameTemplate: "svc-%s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: cfg, Scheme: "my-xds", Logger: quietLogger, ClientOptions: client.Options{Logger: quietLogger}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for tgt, want := range map[string]string{
		"my-xds:///greeter":             "svc-greeter",
		"my-xds://auth.example/greeter": xdstpName,
	} {
		conn, err := grpc.NewClient(tgt, grpc.WithResolvers(b), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := call(ctx, conn, grpc.WaitForReady(true)); err != nil || got != "a" {
			t.Errorf("%s (listener %s): RPC served by %q, %v", tgt, want, got, err)
		}
		conn.Close()
	}
	if _, err := b.Build(target(t, "my-xds://nowhere/greeter"), newFakeCC(), resolver.BuildOptions{}); err == nil || !strings.Contains(err.Error(), `authority "nowhere"`) {
		t.Errorf("Build with an unknown authority: %v; want an error naming it", err)
	}
}

// Channels of one Builder share one client, and so one ADS stream; a
// client given in Options is shared with its owner, who closes it.
func TestSharedClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	for range 3 {
		e.waitServed(e.dial(), 1, func(string) bool { return true })
	}
	if n := e.ms.Counters().Streams; n != 1 {
		t.Errorf("3 channels of one Builder opened %d ADS streams, want 1", n)
	}

	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: e.ms.Address(), NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := grpcxds.NewBuilder(grpcxds.Options{Client: c, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	var conns []*grpc.ClientConn
	for range 2 {
		conn, err := grpc.NewClient("goxds:///"+listener, grpc.WithResolvers(b), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil {
			t.Error(err)
		}
	}
	for _, conn := range conns {
		conn.Close() // must not close c
	}
	if n := e.ms.Counters().Streams; n != 2 {
		t.Errorf("%d ADS streams in all, want 2: one per client", n)
	}
}

// A channel closed and dialed again at once, on a client that stays up,
// gets its configuration again: the client must not drop the cached tree
// while keeping the server believing it has it (the unsubscription and the
// new subscription cancel out before reaching the server).
func TestRedialSharedClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: e.ms.Address(), NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := grpcxds.NewBuilder(grpcxds.Options{Client: c, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		conn, err := grpc.NewClient("goxds:///"+listener, grpc.WithResolvers(b), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil {
			t.Fatalf("channel %d: %v", i+1, err)
		}
		conn.Close()
	}
}

func TestNewBuilderErrors(t *testing.T) {
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts grpcxds.Options
		want string
	}{
		{"upper-case scheme", grpcxds.Options{Bootstrap: cfg, Scheme: "GoXDS"}, `scheme "GoXDS"`},
		{"scheme with a digit first", grpcxds.Options{Bootstrap: cfg, Scheme: "9xds"}, `scheme "9xds"`},
		{"negative failover timeout", grpcxds.Options{Bootstrap: cfg, FailoverTimeout: -1}, "FailoverTimeout"},
		{"invalid bootstrap", grpcxds.Options{Bootstrap: &bootstrap.Config{}}, "xds_servers"},
	} {
		if _, err := grpcxds.NewBuilder(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewBuilder: %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
	t.Setenv(bootstrap.EnvFile, "")
	t.Setenv(bootstrap.EnvConfig, "")
	if _, err := grpcxds.NewBuilder(grpcxds.Options{}); err == nil || !strings.Contains(err.Error(), "no bootstrap") {
		t.Errorf("NewBuilder with no bootstrap anywhere: %v; want an error", err)
	}
}
