package xdsserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
	"github.com/goxds/xds/xdsserver"
)

// Every test stops its servers, channels and management server; no
// goroutine may be left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testTimeout = 20 * time.Second
	nodeID      = "node-1"
	template    = "grpc/server?xds.resource.listening_address=%s"
	sayHello    = "/goxds.test.Greeter/SayHello"
	sayBye      = "/goxds.test.Greeter/SayBye"
	forward     = "/goxds.test.Greeter/Forward"
	chatMethod  = "/goxds.test.Greeter/Chat"
)

// greeterDesc is a hand-made service whose methods all answer with their
// own name, so that no code generation is needed.
var greeterDesc = grpc.ServiceDesc{
	ServiceName: "goxds.test.Greeter",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{method("SayHello"), method("SayBye"), method("Forward")},
	// Chat is a bidirectional stream that echoes each message.
	Streams: []grpc.StreamDesc{{
		StreamName:    "Chat",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			for {
				m := new(wrapperspb.StringValue)
				if err := ss.RecvMsg(m); err != nil {
					return nil // the client is done
				}
				if err := ss.SendMsg(m); err != nil {
					return err
				}
			}
		},
	}},
}

// chat opens a Chat stream and sends and receives one message. It returns
// the stream's status: a SendMsg that fails with io.EOF only says the
// server has ended the stream (a denied one may end before the message is
// sent), and RecvMsg then returns why.
func chat(ctx context.Context, conn *grpc.ClientConn) error {
	st, err := conn.NewStream(ctx, &greeterDesc.Streams[0], chatMethod)
	if err != nil {
		return err
	}
	if err := st.SendMsg(wrapperspb.String("hi")); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return st.RecvMsg(new(wrapperspb.StringValue))
}

func method(name string) grpc.MethodDesc {
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(context.Context, any) (any, error) { return wrapperspb.String(name), nil }
			if icpt == nil {
				return h(ctx, in)
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/goxds.test.Greeter/" + name}, h)
		},
	}
}

var fastBackoff = backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond}

// env is a management server and an xDS-enabled server listening on
// 127.0.0.1, whose serving-mode changes arrive on modes.
type env struct {
	t     *testing.T
	ctx   context.Context
	ms    *testutils.ManagementServer
	srv   *xdsserver.GRPCServer
	lis   net.Listener
	name  string // the server's Listener resource
	port  uint32
	modes chan xdsserver.ServingModeChangeArgs
	// warnings receives the server's log lines (dropped when full).
	warnings chan string
}

// warnings is a slog.Handler that hands each record to a channel as its
// message followed by its attributes (" key=value"), so that a test can wait
// for a log line as an event and check what it names.
type warnings struct{ ch chan string }

func (w warnings) Enabled(context.Context, slog.Level) bool { return true }

func (w warnings) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	select {
	case w.ch <- b.String():
	default:
	}
	return nil
}

func (w warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnings) WithGroup(string) slog.Handler      { return w }

// waitWarning waits for a log line of the server that contains every one
// of subs, and returns it.
func (e *env) waitWarning(subs ...string) string {
	e.t.Helper()
	for {
		select {
		case m := <-e.warnings:
			if !slices.ContainsFunc(subs, func(sub string) bool { return !strings.Contains(m, sub) }) {
				return m
			}
		case <-e.ctx.Done():
			e.t.Fatalf("no log line containing %q", subs)
		}
	}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, testutils.ManagementServerOptions{}, nil)
}

// newEnvWith is newEnv with options for the management server, and a
// function that edits the server's bootstrap (nil: none).
func newEnvWith(t *testing.T, msOpts testutils.ManagementServerOptions, edit func(*bootstrap.Config)) *env {
	t.Helper()
	return newEnvOpts(t, envOptions{ms: msOpts, edit: edit})
}

// envOptions are newEnvOpts's: newEnvWith's, and the server's options.
type envOptions struct {
	ms   testutils.ManagementServerOptions
	edit func(*bootstrap.Config)
	// server returns the server's options given the env and its bootstrap;
	// nil: e.defaultOptions.
	server func(e *env, cfg *bootstrap.Config) []grpc.ServerOption
}

// quietClient are the options of the servers' xDS clients: quiet, quick to
// give up on a missing resource and to reconnect.
var quietClient = client.Options{
	Logger:           slog.New(slog.DiscardHandler),
	WatchExpiry:      2 * time.Second,
	TransportOptions: transport.Options{Backoff: fastBackoff},
}

// defaultOptions are the server's options of newEnv: cfg, its log lines on
// e.warnings, a quiet client, its mode changes on e.modes.
func (e *env) defaultOptions(cfg *bootstrap.Config) []grpc.ServerOption {
	return []grpc.ServerOption{
		xdsserver.BootstrapConfig(cfg),
		xdsserver.Logger(slog.New(warnings{e.warnings})),
		xdsserver.ClientOptions(quietClient),
		e.modeCallback(),
	}
}

// modeCallback sends the server's mode changes to e.modes.
func (e *env) modeCallback() grpc.ServerOption {
	return xdsserver.ServingModeCallback(func(_ net.Addr, args xdsserver.ServingModeChangeArgs) { e.modes <- args })
}

// newEnvOpts is newEnv with every option.
func newEnvOpts(t *testing.T, o envOptions) *env {
	t.Helper()
	msOpts, edit := o.ms, o.edit
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	ms, err := testutils.StartManagementServer(msOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerListenerResourceNameTemplate = template
	if edit != nil {
		edit(cfg)
	}
	e := &env{t: t, ctx: ctx, ms: ms, modes: make(chan xdsserver.ServingModeChangeArgs, 16), warnings: make(chan string, 64)}
	opts := e.defaultOptions
	if o.server != nil {
		opts = func(cfg *bootstrap.Config) []grpc.ServerOption { return o.server(e, cfg) }
	}
	srv, err := xdsserver.NewGRPCServer(opts(cfg)...)
	if err != nil {
		t.Fatal(err)
	}
	srv.RegisterService(&greeterDesc, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.srv, e.lis = srv, lis
	e.port = uint32(lis.Addr().(*net.TCPAddr).Port)
	e.name = "grpc/server?xds.resource.listening_address=" + lis.Addr().String()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after Stop, want nil", err)
		}
	})
	return e
}

func (e *env) update(res testutils.Resources) {
	e.t.Helper()
	if err := e.ms.Update(e.ctx, nodeID, res); err != nil {
		e.t.Fatal(err)
	}
}

// waitMode waits for the next serving-mode change and checks it.
func (e *env) waitMode(want xdsserver.ServingMode) xdsserver.ServingModeChangeArgs {
	e.t.Helper()
	select {
	case got := <-e.modes:
		if got.Mode != want {
			e.t.Fatalf("serving mode = %v (%v), want %v", got.Mode, got.Err, want)
		}
		return got
	case <-e.ctx.Done():
		e.t.Fatalf("no serving mode change to %v", want)
	}
	return xdsserver.ServingModeChangeArgs{}
}

// dial returns a plain channel to the server (the client side needs no
// xDS here); each test closes it before the server stops.
func (e *env) dial() *grpc.ClientConn {
	e.t.Helper()
	conn, err := grpc.NewClient(e.lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: fastBackoff, MinConnectTimeout: time.Second}))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	return conn
}

func call(ctx context.Context, conn *grpc.ClientConn, method string, opts ...grpc.CallOption) error {
	return conn.Invoke(ctx, method, wrapperspb.String("hi"), new(wrapperspb.StringValue), opts...)
}

// serverListener is the server's Listener: one filter chain (match m, nil
// for any) whose connection manager has rc inline and the given HTTP
// filters before the router.
func (e *env) serverListener(m *listenerv3.FilterChainMatch, rc *routev3.RouteConfiguration, filters ...*hcmv3.HttpFilter) *listenerv3.Listener {
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc},
		HttpFilters: append(filters, &hcmv3.HttpFilter{
			Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(&routerv3.Router{})},
		}),
	}
	return &listenerv3.Listener{
		Name: e.name,
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: e.port},
		}}},
		FilterChains: []*listenerv3.FilterChain{{
			Name:             "chain",
			FilterChainMatch: m,
			Filters: []*listenerv3.Filter{{
				Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: testutils.MarshalAny(hcm)},
			}},
		}},
	}
}

// serverRoutes is a route configuration for any authority: SayHello,
// SayBye and Chat are non-forwarding, Forward (last) goes to a cluster (which a server
// must refuse).
func serverRoutes() *routev3.RouteConfiguration {
	nonForwarding := func(path string) *routev3.Route {
		return &routev3.Route{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: path}},
			Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
		}
	}
	return &routev3.RouteConfiguration{
		Name: "server-routes",
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    "all",
			Domains: []string{"*"},
			Routes: []*routev3.Route{
				nonForwarding(sayHello),
				nonForwarding(sayBye),
				nonForwarding(chatMethod),
				{
					Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: forward}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{
						ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "elsewhere"},
					}},
				},
			},
		}},
	}
}

// rbacAllowing is an RBAC filter that lets only methods through.
func rbacAllowing(methods ...string) *hcmv3.HttpFilter {
	var perms []*rbacv3.Permission
	for _, m := range methods {
		perms = append(perms, &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{
			Rule: &matcherv3.PathMatcher_Path{Path: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: m}}},
		}}})
	}
	return rbacWith(&rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{
		Action: rbacv3.RBAC_ALLOW,
		Policies: map[string]*rbacv3.Policy{"allowed-methods": {
			Permissions: perms,
			Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
		}},
	}})
}

// rbacWith is the RBAC filter with config cfg.
func rbacWith(cfg *rbacfilterv3.RBAC) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: "rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(cfg)}}
}

func cidr(addr string, bits uint32) *corev3.CidrRange {
	return &corev3.CidrRange{AddressPrefix: addr, PrefixLen: wrapperspb.UInt32(bits)}
}

// waitForReady makes an RPC wait through the channel's reconnection
// backoff instead of failing at once.
var waitForReady = grpc.WaitForReady(true)

// setRDS makes the Listener's connection manager fetch route configuration
// name over RDS instead of carrying its routes inline.
func setRDS(l *listenerv3.Listener, name string) {
	f := l.FilterChains[0].Filters[0]
	hcm := new(hcmv3.HttpConnectionManager)
	if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
		panic(err)
	}
	hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
		ConfigSource:    &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
		RouteConfigName: name,
	}}
	f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: testutils.MarshalAny(hcm)}
}
