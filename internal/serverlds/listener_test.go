package serverlds_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.uber.org/goleak"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/internal/serverlds"
	"github.com/goxds/xds/internal/servertls"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Every test closes its listeners, clients and management server.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testTimeout = 20 * time.Second
	nodeID      = "node-1"
)

// event is one call of the Listener to its server.
type event struct {
	what     string // "start", "stop" or "deliver"
	gen      int    // the generation's number, from 1
	graceful bool   // of a stop
}

// fakeGen is a generation of fakeServer.
type fakeGen struct {
	n   int
	gen *serverlds.Generation
}

// fakeServer records what the Listener asks of it. With drain, a graceful
// stop never ends (the generation drains until CloseAll).
type fakeServer struct {
	t      *testing.T
	l      *serverlds.Listener[*fakeGen]
	drain  bool
	events chan event

	// n numbers the generations; Start runs under the Listener's lock,
	// one at a time.
	n int
	// startErr is what Start found wrong with the route configurations
	// held when it ran.
	mu       sync.Mutex
	startErr []error
}

func (f *fakeServer) Start(gen *serverlds.Generation) *fakeGen {
	f.n++
	// gRFC A36: a version is served only once its route configurations
	// are all held.
	for _, fc := range servertls.Chains(gen.Config) {
		if _, err := f.l.Routes().Config(fc); err != nil {
			f.mu.Lock()
			f.startErr = append(f.startErr, fmt.Errorf("generation %d started with %w", f.n, err))
			f.mu.Unlock()
		}
	}
	f.events <- event{what: "start", gen: f.n}
	return &fakeGen{n: f.n, gen: gen}
}

func (f *fakeServer) Stop(g *fakeGen, graceful bool) {
	f.events <- event{what: "stop", gen: g.n, graceful: graceful}
	if !graceful || !f.drain {
		f.l.Stopped(g)
	}
}

func (f *fakeServer) Deliver(g *fakeGen, conn net.Conn, _, _ netip.AddrPort) bool {
	conn.Close()
	f.events <- event{what: "deliver", gen: g.n}
	return true
}

func (f *fakeServer) NotServerListener(name string) error {
	return fmt.Errorf("Listener %q is a client's", name)
}

func (f *fakeServer) WrongAddress(name, addr, listening string) error {
	return fmt.Errorf("Listener %q is for %s, not %s", name, addr, listening)
}

func (f *fakeServer) Warn(msg string, args ...any) { f.t.Log(append([]any{msg}, args...)...) }

// env is a management server and a Listener of a fakeServer on
// 127.0.0.1, serving until the test ends.
type env struct {
	t       *testing.T
	ctx     context.Context
	ms      *testutils.ManagementServer
	srv     *fakeServer
	l       *serverlds.Listener[*fakeGen]
	raw     net.Listener
	port    uint32
	reports chan serverlds.Report
	served  chan error
	// applied has a token when an update was handled since it was last
	// taken (Config.Applied).
	applied chan struct{}
}

func newEnv(t *testing.T, drain bool) *env {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	xc, err := client.New(cfg, client.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(xc.Close)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, ms: ms, raw: raw, port: uint32(raw.Addr().(*net.TCPAddr).Port),
		srv:     &fakeServer{t: t, drain: drain, events: make(chan event, 64)},
		reports: make(chan serverlds.Report, 16), served: make(chan error, 1), applied: make(chan struct{}, 1)}
	reporter := serverlds.NewReporter(func(r serverlds.Report) { e.reports <- r })
	e.l = serverlds.New(serverlds.Config[*fakeGen]{Client: xc, Bootstrap: cfg, Raw: raw, Name: "lds",
		Server: e.srv, Reports: reporter, Applied: func() {
			select {
			case e.applied <- struct{}{}:
			default: // a token already waits
			}
		}})
	e.srv.l = e.l
	go func() { e.served <- e.l.Serve() }()
	t.Cleanup(func() {
		e.l.Close(false)
		e.l.CloseAll()
		if err := <-e.served; err != nil {
			t.Errorf("Serve returned %v after Close, want nil", err)
		}
		e.srv.mu.Lock()
		defer e.srv.mu.Unlock()
		for _, err := range e.srv.startErr {
			t.Error(err)
		}
	})
	return e
}

// publish has the management server hold ls and rcs.
func (e *env) publish(ls []*listenerv3.Listener, rcs ...*routev3.RouteConfiguration) {
	e.t.Helper()
	if err := e.ms.Update(e.ctx, nodeID, testutils.Resources{Listeners: ls, Routes: rcs}); err != nil {
		e.t.Fatal(err)
	}
}

// listener is the Listener "lds" for port, of one chain named chain whose
// route configuration is rc inline, or rdsName's over RDS when rc is nil.
func listener(port uint32, chain string, rc *routev3.RouteConfiguration, rdsName string) *listenerv3.Listener {
	hcm := &hcmv3.HttpConnectionManager{HttpFilters: []*hcmv3.HttpFilter{{
		Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(&routerv3.Router{})},
	}}}
	if rc != nil {
		hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc}
	} else {
		hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
			RouteConfigName: rdsName,
		}}
	}
	return &listenerv3.Listener{
		Name: "lds",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
		}}},
		FilterChains: []*listenerv3.FilterChain{{Name: chain, Filters: []*listenerv3.Filter{{
			Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: testutils.MarshalAny(hcm)},
		}}}},
	}
}

// routes is a route configuration of one virtual host, one route.
func routes(name string) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"},
		Routes: []*routev3.Route{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}}}}}}}
}

// next waits for the server's next event and checks it.
func (e *env) next(want event) {
	e.t.Helper()
	select {
	case got := <-e.srv.events:
		if got != want {
			e.t.Fatalf("server told %+v, want %+v", got, want)
		}
	case <-e.ctx.Done():
		e.t.Fatalf("server not told %+v", want)
	}
}

// nextMode waits for the next report and checks its mode.
func (e *env) nextMode(want serverlds.Mode) serverlds.Report {
	e.t.Helper()
	select {
	case got := <-e.reports:
		if got.Mode != want || got.Name != "lds" || got.Addr.String() != e.raw.Addr().String() {
			e.t.Fatalf("report %v %q %v (%v), want %v for lds at %v", got.Mode, got.Name, got.Addr, got.Err, want, e.raw.Addr())
		}
		return got
	case <-e.ctx.Done():
		e.t.Fatalf("no report of mode %v", want)
	}
	return serverlds.Report{}
}

// dialClosed dials the listener and checks that the connection is closed
// without reaching a generation.
func (e *env) dialClosed() {
	e.t.Helper()
	c, err := net.Dial("tcp", e.raw.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testTimeout))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		e.t.Fatalf("read %d bytes, %v from a listener not serving, want EOF", n, err)
	}
}

// dial dials the listener, to be delivered.
func (e *env) dial() {
	e.t.Helper()
	c, err := net.Dial("tcp", e.raw.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	c.Close()
}

// TestGenerations: a Listener version is served once its route
// configurations are held (RDS before the generation starts), a new one
// replaces it and the old one drains, and a Listener for another address
// stops serving, told to the Reporter; connections go to the generation
// in force, or are closed while none is.
func TestGenerations(t *testing.T) {
	e := newEnv(t, false)
	e.dialClosed()

	// The Listener alone: no generation until its route configuration.
	e.publish([]*listenerv3.Listener{listener(e.port, "one", nil, "rc1")})
	e.publish([]*listenerv3.Listener{listener(e.port, "one", nil, "rc1")}, routes("rc1"))
	e.next(event{what: "start", gen: 1})
	if r := e.nextMode(serverlds.Serving); r.Err != nil {
		t.Errorf("serving, with error %v", r.Err)
	}
	e.dial()
	e.next(event{what: "deliver", gen: 1})

	// A new version: its own route configuration first, then the swap.
	e.publish([]*listenerv3.Listener{listener(e.port, "two", nil, "rc2")}, routes("rc1"), routes("rc2"))
	e.next(event{what: "start", gen: 2})
	e.next(event{what: "stop", gen: 1, graceful: true})
	e.dial()
	e.next(event{what: "deliver", gen: 2})

	// For another address: not serving, and the reason says why.
	e.publish([]*listenerv3.Listener{listener(e.port+1, "three", routes("inline"), "")})
	r := e.nextMode(serverlds.NotServing)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "not "+e.raw.Addr().String()) {
		t.Errorf("not serving because of %v, want the server's WrongAddress", r.Err)
	}
	e.next(event{what: "stop", gen: 2, graceful: true})
	e.dialClosed()

	// Serving again, with an inline route configuration.
	e.publish([]*listenerv3.Listener{listener(e.port, "four", routes("inline"), "")})
	e.next(event{what: "start", gen: 3})
	e.nextMode(serverlds.Serving)

	e.l.Close(true)
	e.next(event{what: "stop", gen: 3, graceful: true})
}

// TestCloseAllEndsDrains: a generation replaced drains until its server
// says it stopped; Close stops the one in force, and CloseAll ends at
// once every one that has not stopped, then none.
func TestCloseAllEndsDrains(t *testing.T) {
	e := newEnv(t, true)
	e.publish([]*listenerv3.Listener{listener(e.port, "one", routes("a"), "")})
	e.next(event{what: "start", gen: 1})
	e.publish([]*listenerv3.Listener{listener(e.port, "two", routes("b"), "")})
	e.next(event{what: "start", gen: 2})
	e.next(event{what: "stop", gen: 1, graceful: true})

	e.l.Close(true)
	e.next(event{what: "stop", gen: 2, graceful: true})
	e.l.CloseAll()
	stopped := map[event]bool{}
	for range 2 {
		select {
		case ev := <-e.srv.events:
			stopped[ev] = true
		case <-e.ctx.Done():
			t.Fatalf("CloseAll stopped %v, want both generations", stopped)
		}
	}
	for n := 1; n <= 2; n++ {
		if ev := (event{what: "stop", gen: n}); !stopped[ev] {
			t.Errorf("CloseAll stopped %v, want %+v", stopped, ev)
		}
	}
	e.l.CloseAll()
	select {
	case ev := <-e.srv.events:
		t.Errorf("a second CloseAll told %+v: every generation had stopped", ev)
	default:
	}
}

// TestSet: once stopped, a set serves no listener: Serve returns
// ErrStopped and closes its socket. (That Stop reaches the listeners
// serving is what every test of httpxds and xdsserver ends with.)
func TestSet(t *testing.T) {
	var set serverlds.Set[*fakeGen]
	if ls, already := set.Stop(); len(ls) != 0 || already {
		t.Errorf("Stop of a new set = %d listeners, already %v", len(ls), already)
	}
	if _, already := set.Stop(); !already {
		t.Error("a second Stop says the set had not stopped")
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := serverlds.New(serverlds.Config[*fakeGen]{Raw: raw, Name: "lds", Server: &fakeServer{t: t}})
	if err := set.Serve(l); !errors.Is(err, serverlds.ErrStopped) {
		t.Errorf("Serve after Stop = %v, want ErrStopped", err)
	}
	if c, err := raw.Accept(); !errors.Is(err, net.ErrClosed) {
		if c != nil {
			c.Close()
		}
		t.Errorf("Accept after Serve refused = %v, want the socket closed", err)
	}
}

// Config.Applied is called once an update has been handled: after it, the
// route configuration an RDS update brought is the one requests read (no
// new generation), and a new Listener version's generation is the one in
// force. Each event here is waited for with the test's deadline.
func TestApplied(t *testing.T) {
	e := newEnv(t, false)
	rc := func(vh string) *routev3.RouteConfiguration {
		r := routes("rc1")
		r.VirtualHosts[0].Name = vh
		return r
	}
	// waitVH waits for the update after which rc1's virtual host is vh.
	waitVH := func(vh string) {
		t.Helper()
		for {
			select {
			case <-e.applied:
			case <-e.ctx.Done():
				t.Fatalf("no update applied route configuration rc1 with virtual host %q", vh)
			}
			got, err := e.l.Routes().Config(&resources.FilterChain{RouteConfigName: "rc1"})
			if err == nil && got.VirtualHosts[0].Name == vh {
				return
			}
		}
	}
	e.publish([]*listenerv3.Listener{listener(e.port, "one", nil, "rc1")}, rc("v1"))
	e.next(event{what: "start", gen: 1})
	waitVH("v1")
	e.publish([]*listenerv3.Listener{listener(e.port, "one", nil, "rc1")}, rc("v2"))
	waitVH("v2")
	select {
	case ev := <-e.srv.events:
		t.Errorf("an RDS update made the server %+v, want nothing", ev)
	default:
	}
}
