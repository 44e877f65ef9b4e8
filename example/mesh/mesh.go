package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/grpcxds/xdscreds"
	"github.com/goxds/xds/internal/demopki"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

const (
	nodeID       = "mesh-demo"
	serviceName  = "greeter" // the client's target: goxds:///greeter
	clientID     = "spiffe://mesh.demo/ns/default/sa/client"
	serverID     = "spiffe://mesh.demo/ns/default/sa/greeter"
	template     = "grpc/server?xds.resource.listening_address=%s"
	sayHello     = "/goxds.example.Greeter/SayHello"
	sayBye       = "/goxds.example.Greeter/SayBye"
	tlsSocket    = "envoy.transport_sockets.tls"
	shortTimeout = 2 * time.Second
)

// greeterDesc is a hand-made service (no code generation): each method
// answers with its name and the caller's SPIFFE ID.
var greeterDesc = grpc.ServiceDesc{
	ServiceName: "goxds.example.Greeter",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{greeterMethod("SayHello"), greeterMethod("SayBye")},
}

func greeterMethod(name string) grpc.MethodDesc {
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, _ any) (any, error) {
				caller := "an unauthenticated caller"
				if p, ok := peer.FromContext(ctx); ok {
					if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && ti.SPIFFEID != nil {
						caller = ti.SPIFFEID.String()
					}
				}
				return wrapperspb.String(name + " to " + caller), nil
			}
			if icpt == nil {
				return h(ctx, in)
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/goxds.example.Greeter/" + name}, h)
		},
	}
}

// mesh is the demo's world: the management server, the xDS-enabled
// server, and the client channel.
type mesh struct {
	out    io.Writer
	pki    *demopki.PKI
	ms     *testutils.ManagementServer
	srv    *xdsserver.GRPCServer
	served chan error
	lis    net.Listener
	conn   *grpc.ClientConn
	b      *grpcxds.Builder
	modes  chan xdsserver.ServingModeChangeArgs
	once   sync.Once
}

func startMesh(ctx context.Context, out io.Writer) (m *mesh, err error) {
	// The demo's lines and the channel's warnings (below) are written from
	// different goroutines.
	out = &lockedWriter{w: out}
	m = &mesh{out: out, modes: make(chan xdsserver.ServingModeChangeArgs, 8), served: make(chan error, 1)}
	defer func() {
		if err != nil {
			m.stop()
		}
	}()
	if m.pki, err = demopki.New("mesh"); err != nil {
		return nil, err
	}
	srvCert, srvKey, err := m.pki.Issue("greeter", serverID, false)
	if err != nil {
		return nil, err
	}
	cliCert, cliKey, err := m.pki.Issue("client", clientID, true)
	if err != nil {
		return nil, err
	}
	if m.ms, err = testutils.StartManagementServer(testutils.ManagementServerOptions{}); err != nil {
		return nil, err
	}
	quiet := client.Options{Logger: slog.New(slog.DiscardHandler), WatchExpiry: shortTimeout}

	// The server: its bootstrap has the Listener name template and its own
	// certificate.
	srvCfg, err := m.bootstrap(srvCert, srvKey)
	if err != nil {
		return nil, err
	}
	srvCfg.ServerListenerResourceNameTemplate = template
	// xDS server credentials, so that the Listener's DownstreamTlsContext
	// decides each connection's security (without them the server would
	// serve plaintext, as grpc-go's does).
	srvCreds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		return nil, err
	}
	m.srv, err = xdsserver.NewGRPCServer(grpc.Creds(srvCreds),
		xdsserver.BootstrapConfig(srvCfg), xdsserver.ClientOptions(quiet),
		xdsserver.ServingModeCallback(func(addr net.Addr, a xdsserver.ServingModeChangeArgs) { m.modes <- a }),
	)
	if err != nil {
		return nil, err
	}
	m.srv.RegisterService(&greeterDesc, struct{}{})
	if m.lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	go func() { m.served <- m.srv.Serve(m.lis) }()

	// The client: xDS credentials, so that the cluster's UpstreamTlsContext
	// decides its connections' security.
	cliCfg, err := m.bootstrap(cliCert, cliKey)
	if err != nil {
		return nil, err
	}
	// The client's routine lines stay quiet, but the channel's warnings
	// (a cluster with no usable endpoint, a configuration refused, a
	// channel made without the goxds interceptors) are shown: they say
	// why RPCs fail.
	warnings := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: cliCfg, ClientOptions: quiet, Logger: warnings})
	if err != nil {
		return nil, err
	}
	m.b = b
	creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		return nil, err
	}
	// grpcxds.NewClient, not grpc.WithResolvers(b) alone: its interceptors
	// apply the per-RPC part of the configuration (the RBAC here is the
	// server's; route timeouts, retries and fault injection would be the
	// client's).
	if m.conn, err = grpcxds.NewClient("goxds:///"+serviceName, b, grpc.WithTransportCredentials(creds)); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "management server on %s; greeter (xdsserver) on %s, %s; client (grpcxds) %s, to goxds:///%s\n\n",
		m.ms.Address(), m.lis.Addr(), serverID, clientID, serviceName)
	return m, nil
}

// bootstrap is a bootstrap for the management server with two certificate
// providers: "identity" (cert and key) and "roots" (the demo's CA). The
// server is marked fail_on_data_errors: the demo deletes the greeter's
// Listener to show the server stop serving, and without that feature a
// deletion leaves the Listener held in force (gRFC A88).
func (m *mesh) bootstrap(cert, key string) (*bootstrap.Config, error) {
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI:      m.ms.Address(),
		NodeID:         nodeID,
		ServerFeatures: []string{bootstrap.FeatureFailOnDataErrors},
	}))
	if err != nil {
		return nil, err
	}
	id, err := json.Marshal(map[string]string{"certificate_file": cert, "private_key_file": key, "refresh_interval": "1s"})
	if err != nil {
		return nil, err
	}
	roots, err := json.Marshal(map[string]string{"ca_certificate_file": m.pki.CAFile})
	if err != nil {
		return nil, err
	}
	cfg.CertificateProviders = map[string]bootstrap.CertificateProvider{
		"identity": {PluginName: "file_watcher", Config: id},
		"roots":    {PluginName: "file_watcher", Config: roots},
	}
	return cfg, nil
}

func (m *mesh) stop() {
	m.once.Do(func() {
		if m.conn != nil {
			m.conn.Close()
		}
		if m.b != nil {
			m.b.Close()
		}
		if m.srv != nil {
			m.srv.Stop()
			if m.lis != nil {
				<-m.served
			}
		}
		if m.ms != nil {
			m.ms.Stop()
		}
		if m.pki != nil {
			m.pki.Remove()
		}
	})
}

// resources is what the management server serves: the server's Listener
// (if withServer) and the client's tree to it.
func (m *mesh) resources(withServer bool) testutils.Resources {
	port := uint32(m.lis.Addr().(*net.TCPAddr).Port)
	cluster := testutils.Cluster("greeter-cluster", "")
	cluster.TransportSocket = socket(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateProviderInstance: instance("identity"),
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			CaCertificateProviderInstance: instance("roots"),
			MatchSubjectAltNames:          []*matcherv3.StringMatcher{exact(serverID)},
		}},
	}})
	res := testutils.Resources{
		Listeners: []*listenerv3.Listener{testutils.Listener(serviceName, "greeter-route")},
		Routes:    []*routev3.RouteConfiguration{testutils.RouteConfig("greeter-route", "*", "greeter-cluster")},
		Clusters:  []*clusterv3.Cluster{cluster},
		Endpoints: []*endpointv3.ClusterLoadAssignment{testutils.ClusterLoadAssignment("greeter-cluster", "127.0.0.1", port)},
	}
	if withServer {
		res.Listeners = append(res.Listeners, m.serverListener(port))
	}
	return res
}

// serverListener is the greeter's Listener: one filter chain, mTLS with a
// client certificate required, RBAC allowing SayHello from clientID only,
// and a route that serves every RPC (non_forwarding_action).
func (m *mesh) serverListener(port uint32) *listenerv3.Listener {
	rbac := &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{
		Action: rbacv3.RBAC_ALLOW,
		Policies: map[string]*rbacv3.Policy{"client-may-say-hello": {
			Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{
				Rule: &matcherv3.PathMatcher_Path{Path: exact(sayHello)},
			}}}},
			Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{
				PrincipalName: exact(clientID),
			}}}},
		}},
	}}
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
			}}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(rbac)}},
			{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(&routerv3.Router{})}},
		},
	}
	return &listenerv3.Listener{
		Name: "grpc/server?xds.resource.listening_address=" + m.lis.Addr().String(),
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
		}}},
		FilterChains: []*listenerv3.FilterChain{{
			Name: "mtls",
			Filters: []*listenerv3.Filter{{
				Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: testutils.MarshalAny(hcm)},
			}},
			TransportSocket: socket(&tlsv3.DownstreamTlsContext{
				RequireClientCertificate: wrapperspb.Bool(true),
				CommonTlsContext: &tlsv3.CommonTlsContext{
					TlsCertificateProviderInstance: instance("identity"),
					ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
						CaCertificateProviderInstance: instance("roots"),
					}},
				},
			}),
		}},
	}
}

func socket(m proto.Message) *corev3.TransportSocket {
	return &corev3.TransportSocket{Name: tlsSocket, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: testutils.MarshalAny(m)}}
}

func instance(name string) *tlsv3.CertificateProviderPluginInstance {
	return &tlsv3.CertificateProviderPluginInstance{InstanceName: name}
}

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

// play runs the steps and prints what each shows.
func (m *mesh) play(ctx context.Context) error {
	step := func(n int, format string, args ...any) {
		fmt.Fprintf(m.out, "%d. "+format+"\n", append([]any{n}, args...)...)
	}
	update := func(withServer bool) error { return m.ms.Update(ctx, nodeID, m.resources(withServer)) }
	waitMode := func(want xdsserver.ServingMode) (xdsserver.ServingModeChangeArgs, error) {
		select {
		case a := <-m.modes:
			if a.Mode != want {
				return a, fmt.Errorf("server is %v (%v), want %v", a.Mode, a.Err, want)
			}
			return a, nil
		case <-ctx.Done():
			return xdsserver.ServingModeChangeArgs{}, fmt.Errorf("server never became %v", want)
		}
	}
	call := func(conn *grpc.ClientConn, method string, opts ...grpc.CallOption) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, shortTimeout)
		defer cancel()
		out := new(wrapperspb.StringValue)
		err := conn.Invoke(ctx, method, wrapperspb.String("hi"), out, opts...)
		return out.GetValue(), err
	}

	if err := update(true); err != nil {
		return err
	}
	if _, err := waitMode(xdsserver.ServingModeServing); err != nil {
		return err
	}
	step(1, "the greeter's Listener arrived: serving")

	reply, err := call(m.conn, sayHello, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("SayHello over mTLS: %v", err)
	}
	step(2, "SayHello over mTLS: %q", reply)

	_, err = call(m.conn, sayBye)
	step(3, "SayBye: %v (RBAC allows only SayHello)", status.Code(err))

	plain, err := grpc.NewClient(m.lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	_, err = call(plain, sayHello)
	plain.Close()
	step(4, "a plaintext client: %v (the greeter requires mTLS)", status.Code(err))

	if err := update(false); err != nil {
		return err
	}
	a, err := waitMode(xdsserver.ServingModeNotServing)
	if err != nil {
		return err
	}
	step(5, "the greeter's Listener deleted: not serving (%v)", a.Err)

	if err := update(true); err != nil {
		return err
	}
	if _, err := waitMode(xdsserver.ServingModeServing); err != nil {
		return err
	}
	reply, err = call(m.conn, sayHello, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("SayHello after the Listener came back: %v", err)
	}
	step(6, "the Listener back: serving; SayHello: %q", reply)
	return nil
}

// lockedWriter writes to w one Write at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
