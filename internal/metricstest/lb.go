package metricstest

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/dataplane/outlier"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// OutlierTarget is the grpc.target RunOutlier's detector reports.
const OutlierTarget = "goxds:///outliers"

// OutlierKey is one series of the outlier counters: Reason is "" for
// ejections_enforced.
type OutlierKey struct {
	Target, BackendService, Method, Reason string
}

// RunOutlier drives goxds's outlier detection (dataplane/outlier) on a
// fake clock through one interval in which two of five endpoints of leaf
// cluster "leaf-A" fail every request: the success rate algorithm finds
// both and its enforcing percentage (0) ejects neither; the failure
// percentage algorithm finds both and ejects one, max_ejection_percent
// (20) stopping the other. m hears of each, with OutlierTarget, as
// grpcxds's channels report them. It returns what m heard, by series,
// once it is all reported.
func RunOutlier(t *testing.T, m grpcxds.OutlierMetrics) map[OutlierKey]int {
	t.Helper()
	clk := fakeClock{testutils.NewFakeClock(time.Unix(1000, 0))}
	var owner sync.Mutex
	tee := &outlierTee{next: m, got: map[OutlierKey]int{}}
	d := outlier.New(clk, func(f func() bool) {
		owner.Lock()
		defer owner.Unlock()
		f()
	}, targeted{tee, OutlierTarget}, "leaf-A")
	pool := endpoint.NewPool(nopDialer{}, nil)
	loc := lbpolicy.Locality{Weight: 1}
	var eps []*endpoint.Endpoint
	for i := range 5 {
		ep, _ := pool.Get([]string{fmt.Sprintf("10.0.0.%d:80", i+1)}, "")
		eps = append(eps, ep)
		loc.Endpoints = append(loc.Endpoints, lbpolicy.WeightedEndpoint{Endpoint: ep, Weight: 1})
	}
	owner.Lock()
	d.Update(outlier.Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute,
		MaxEjectionPercent: 20,
		SuccessRate:        &outlier.SuccessRate{StdevFactor: 1000, Enforcement: 0, MinimumHosts: 5, RequestVolume: 10},
		FailurePercentage:  &outlier.FailurePercentage{Threshold: 50, Enforcement: 100, MinimumHosts: 5, RequestVolume: 10},
	}, []lbpolicy.Locality{loc})
	owner.Unlock()
	defer func() {
		owner.Lock()
		d.Stop()
		owner.Unlock()
	}()
	for i, ep := range eps {
		for range 20 {
			d.Record(ep, i >= 2)
		}
	}
	clk.Advance(time.Second) // the interval's end, reported before Advance returns
	want := map[OutlierKey]int{
		{OutlierTarget, "leaf-A", outlier.MethodFailurePercentage, ""}:                                1,
		{OutlierTarget, "leaf-A", outlier.MethodFailurePercentage, outlier.ReasonMaxEjectionOverflow}: 1,
		{OutlierTarget, "leaf-A", outlier.MethodSuccessRate, outlier.ReasonEnforcementPercentage}:     2,
	}
	got := tee.snapshot()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the detector reported %v, want %v", got, want)
	}
	return got
}

// fakeClock is testutils.FakeClock as an lbpolicy.Clock.
type fakeClock struct{ *testutils.FakeClock }

func (c fakeClock) AfterFunc(d time.Duration, f func()) lbpolicy.Timer {
	return c.FakeClock.AfterFunc(d, f)
}

type nopDialer struct{}

func (nopDialer) NewConn(*endpoint.Endpoint) (endpoint.Conn, error) {
	return nil, fmt.Errorf("no connections here")
}
func (nopDialer) Dropped(*endpoint.Endpoint) {}

// targeted adds a channel's target, as grpcxds does.
type targeted struct {
	m      grpcxds.OutlierMetrics
	target string
}

func (t targeted) EjectionEnforced(backendService, method string) {
	t.m.EjectionEnforced(t.target, backendService, method)
}

func (t targeted) EjectionUnenforced(backendService, method, reason string) {
	t.m.EjectionUnenforced(t.target, backendService, method, reason)
}

// outlierTee passes the measurements on, and counts them.
type outlierTee struct {
	next grpcxds.OutlierMetrics
	mu   sync.Mutex
	got  map[OutlierKey]int
}

func (o *outlierTee) EjectionEnforced(target, backendService, method string) {
	o.next.EjectionEnforced(target, backendService, method)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got[OutlierKey{target, backendService, method, ""}]++
}

func (o *outlierTee) EjectionUnenforced(target, backendService, method, reason string) {
	o.next.EjectionUnenforced(target, backendService, method, reason)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got[OutlierKey{target, backendService, method, reason}]++
}

func (o *outlierTee) snapshot() map[OutlierKey]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[OutlierKey]int, len(o.got))
	for k, v := range o.got {
		out[k] = v
	}
	return out
}

// ConnKey is one connection's labels.
type ConnKey struct {
	Target, BackendService, Locality string
}

// DisconnectKey is one series of grpc.subchannel.disconnections.
type DisconnectKey struct {
	ConnKey
	Reason string
}

// ConnStage is where RunSubchannel is, and what the channel reported so
// far, by series: nothing moves while check runs.
type ConnStage struct {
	Name string
	// A, B and Dead are the labels of the three endpoints' connections.
	A, B, Dead              ConnKey
	Succeeded, Failed, Open map[ConnKey]int
	Disconnections          map[DisconnectKey]int
}

// The stages at which RunSubchannel calls check.
const (
	// StageConnected: a and b connected, the dead endpoint failed once.
	StageConnected = "connected"
	// StageLost: b's server stopped; b's connection was lost, and its
	// attempt to connect again failed.
	StageLost = "lost"
	// StageShutdown: the configuration dropped a, whose connection the
	// balancer shut down.
	StageShutdown = "shutdown"
)

// RunSubchannel makes a goxds channel whose Builder measures its
// connections with m, against go-control-plane's server and real
// backends on 127.0.0.1: cluster "A" lists a (locality r1/z1/s1) and b
// (r2/z2) serving, and a closed port (r3) that refuses connections. It
// takes the channel through the connections being made, b's server
// stopping, and a leaving the configuration, calling check at each stage
// (StageConnected, StageLost, StageShutdown) once the channel has
// reported it. The channel's backoff between attempts is a minute, so
// that nothing moves while check runs.
func RunSubchannel(t *testing.T, m grpcxds.SubchannelMetrics, check func(t *testing.T, s ConnStage)) {
	t.Helper()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Stop()
	b, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: "node"}))
	if err != nil {
		t.Fatal(err)
	}
	tee := &connTee{next: m, poke: make(chan struct{}, 1)}
	tee.reset()
	builder, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: b, SubchannelMetrics: tee, Logger: quiet(),
		ClientOptions: client.Options{Logger: quiet(), TransportOptions: fast}})
	if err != nil {
		t.Fatal(err)
	}
	defer builder.Close()

	a, bsrv := serve(t), serve(t)
	defer a.Stop()
	defer bsrv.Stop()
	deadPort := closedPort(t)
	r1 := testutils.Locality{Region: "r1", Zone: "z1", SubZone: "s1"}
	r2 := testutils.Locality{Region: "r2", Zone: "z2"}
	r3 := testutils.Locality{Region: "r3"}
	resources := func(eps ...testutils.EndpointSpec) testutils.Resources {
		return testutils.Resources{
			Listeners: []*listenerv3.Listener{testutils.Listener("svc", "route")},
			Routes:    []*routev3.RouteConfiguration{testutils.RouteConfig("route", "*", "A")},
			Clusters:  []*clusterv3.Cluster{testutils.Cluster("A", "")},
			Endpoints: []*endpointv3.ClusterLoadAssignment{testutils.Endpoints("A", eps)},
		}
	}
	aSpec := testutils.EndpointSpec{Host: "127.0.0.1", Port: port(a.addr), Locality: r1}
	bSpec := testutils.EndpointSpec{Host: "127.0.0.1", Port: port(bsrv.addr), Locality: r2}
	deadSpec := testutils.EndpointSpec{Host: "127.0.0.1", Port: deadPort, Locality: r3}
	ctx := t.Context()
	if err := ms.Update(ctx, "node", resources(aSpec, bSpec, deadSpec)); err != nil {
		t.Fatal(err)
	}
	slow := backoff.Config{BaseDelay: time.Minute, Multiplier: 1, MaxDelay: time.Minute}
	conn, err := grpc.NewClient("goxds:///svc", append(builder.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: slow, MinConnectTimeout: 10 * time.Second}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Connect()
	target := conn.CanonicalTarget()
	loc := func(l testutils.Locality) string {
		return fmt.Sprintf("{region=%q, zone=%q, sub_zone=%q}", l.Region, l.Zone, l.SubZone)
	}
	ka, kb, kd := ConnKey{target, "A", loc(r1)}, ConnKey{target, "A", loc(r2)}, ConnKey{target, "A", loc(r3)}
	stage := func(name string, want func(s ConnStage) bool) {
		t.Helper()
		s := tee.wait(t, name, func(s ConnStage) bool { return want(s) })
		s.Name, s.A, s.B, s.Dead = name, ka, kb, kd
		check(t, s)
	}

	stage(StageConnected, func(s ConnStage) bool {
		return s.Succeeded[ka] == 1 && s.Succeeded[kb] == 1 && s.Failed[kd] == 1 && s.Open[ka] == 1 && s.Open[kb] == 1
	})
	bsrv.Stop()
	stage(StageLost, func(s ConnStage) bool {
		return s.Disconnections[DisconnectKey{kb, "unknown"}] == 1 && s.Open[kb] == 0 && s.Failed[kb] == 1
	})
	if err := ms.Update(ctx, "node", resources(bSpec, deadSpec)); err != nil {
		t.Fatal(err)
	}
	stage(StageShutdown, func(s ConnStage) bool {
		return s.Disconnections[DisconnectKey{ka, "subchannel shutdown"}] == 1 && s.Open[ka] == 0
	})
}

// server is a gRPC server with no services: a channel connects to it.
type server struct {
	addr string
	srv  *grpc.Server
	done chan struct{}
	once sync.Once
}

func serve(t *testing.T) *server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: lis.Addr().String(), srv: grpc.NewServer(), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(lis)
	}()
	return s
}

// Stop closes the server and its connections at once.
func (s *server) Stop() {
	s.once.Do(func() {
		s.srv.Stop()
		<-s.done
	})
}

func port(addr string) uint32 {
	_, p, _ := net.SplitHostPort(addr)
	var n uint32
	fmt.Sscan(p, &n)
	return n
}

// closedPort returns a port of 127.0.0.1 nothing listens on: one that was
// just released.
func closedPort(t *testing.T) uint32 {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := uint32(lis.Addr().(*net.TCPAddr).Port)
	lis.Close()
	return p
}

// connTee passes the channel's measurements on, and sums them.
type connTee struct {
	next grpcxds.SubchannelMetrics
	poke chan struct{}
	mu   sync.Mutex
	s    ConnStage
}

func (c *connTee) reset() {
	c.s = ConnStage{Succeeded: map[ConnKey]int{}, Failed: map[ConnKey]int{}, Open: map[ConnKey]int{},
		Disconnections: map[DisconnectKey]int{}}
}

func (c *connTee) note(f func(s *ConnStage)) {
	c.mu.Lock()
	f(&c.s)
	c.mu.Unlock()
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

func (c *connTee) ConnectionAttemptSucceeded(target, backendService, locality string) {
	c.next.ConnectionAttemptSucceeded(target, backendService, locality)
	c.note(func(s *ConnStage) { s.Succeeded[ConnKey{target, backendService, locality}]++ })
}

func (c *connTee) ConnectionAttemptFailed(target, backendService, locality string) {
	c.next.ConnectionAttemptFailed(target, backendService, locality)
	c.note(func(s *ConnStage) { s.Failed[ConnKey{target, backendService, locality}]++ })
}

func (c *connTee) Disconnection(target, backendService, locality, reason string) {
	c.next.Disconnection(target, backendService, locality, reason)
	c.note(func(s *ConnStage) {
		s.Disconnections[DisconnectKey{ConnKey{target, backendService, locality}, reason}]++
	})
}

func (c *connTee) OpenConnections(target, backendService, locality string, delta int) {
	c.next.OpenConnections(target, backendService, locality, delta)
	c.note(func(s *ConnStage) { s.Open[ConnKey{target, backendService, locality}] += delta })
}

// wait waits until cond holds of what was reported, and returns a copy.
func (c *connTee) wait(t *testing.T, what string, cond func(ConnStage) bool) ConnStage {
	t.Helper()
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		ok := cond(c.s)
		var cp ConnStage
		if ok {
			cp = ConnStage{Succeeded: clone(c.s.Succeeded), Failed: clone(c.s.Failed), Open: clone(c.s.Open),
				Disconnections: clone(c.s.Disconnections)}
		}
		got := fmt.Sprintf("%+v", c.s)
		c.mu.Unlock()
		if ok {
			return cp
		}
		select {
		case <-c.poke:
		case <-deadline:
			t.Fatalf("waiting for stage %s; reported: %s", what, got)
		}
	}
}

func clone[K comparable](m map[K]int) map[K]int {
	out := make(map[K]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }
