package grpcxds_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/grpcxds/xdscreds"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// The server's identity in the tests' PKI.
const (
	serverSPIFFE = "spiffe://goxds.test/ns/default/sa/server"
	serverDNS    = "server.goxds.test"
)

// mesh is a PKI with a server certificate and a client certificate, and
// the bootstrap certificate providers that read the client's files: "id"
// (the client certificate, re-read every 20ms) and "roots" (the CA).
type mesh struct {
	pki    *testutils.PKI
	server testutils.Cert
	client testutils.Cert
}

func newMesh(t *testing.T) *mesh {
	t.Helper()
	p := testutils.NewPKI(t)
	return &mesh{
		pki:    p,
		server: p.Issue("server", testutils.CertOptions{DNSNames: []string{serverDNS}, URIs: []string{serverSPIFFE}}),
		client: p.Issue("client", testutils.CertOptions{Client: true, URIs: []string{"spiffe://goxds.test/ns/default/sa/client"}}),
	}
}

func (m *mesh) providers(t *testing.T) map[string]bootstrap.CertificateProvider {
	t.Helper()
	cfg := func(v map[string]string) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return map[string]bootstrap.CertificateProvider{
		"id": {PluginName: "file_watcher", Config: cfg(map[string]string{
			"certificate_file": m.client.CertFile, "private_key_file": m.client.KeyFile, "refresh_interval": "0.020s"})},
		"roots": {PluginName: "file_watcher", Config: cfg(map[string]string{"ca_certificate_file": m.pki.CAFile})},
	}
}

// newSecureEnv is newEnv with the mesh's certificate providers in the
// bootstrap.
func newSecureEnv(t *testing.T, m *mesh) *env {
	t.Helper()
	return newSecureEnvLogging(t, m, nil)
}

// newSecureEnvLogging is newSecureEnv with the Builder's logger.
func newSecureEnvLogging(t *testing.T, m *mesh, logger *slog.Logger) *env {
	t.Helper()
	return newSecureEnvWith(t, m, logger, false)
}

// newSecureEnvWith is newSecureEnv with the Builder's logger; with
// sharedClient, the Builder is given a Client made from the bootstrap
// instead of the bootstrap itself.
func newSecureEnvWith(t *testing.T, m *mesh, logger *slog.Logger, sharedClient bool) *env {
	t.Helper()
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
	cfg.CertificateProviders = m.providers(t)
	opts := grpcxds.Options{Bootstrap: cfg, Logger: logger, ClientOptions: client.Options{
		Logger:           quietLogger,
		WatchExpiry:      2 * time.Second,
		TransportOptions: transport.Options{Backoff: fastBackoff, DialOptions: []grpc.DialOption{fastConnect}},
	}}
	if sharedClient {
		c, err := client.New(cfg, opts.ClientOptions)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		opts = grpcxds.Options{Client: c, Logger: logger}
	}
	b, err := grpcxds.NewBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close) // after the channels', before the server stops
	return &env{t: t, ctx: ctx, ms: ms, builder: b}
}

// xdsCreds are the client credentials of the tests: xdscreds, plaintext
// for clusters without TLS.
func xdsCreds(t *testing.T) grpc.DialOption {
	t.Helper()
	c, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	return grpc.WithTransportCredentials(c)
}

// tlsBackend is a greeter that requires TLS with a client certificate of
// the mesh's CA. It counts connections whose first byte is not a TLS
// record (plaintext), and reports each client certificate serial it sees.
type tlsBackend struct {
	*backend
	plaintext atomic.Int64
	sni       atomic.Value // string: the server name of the last handshake
	mu        sync.Mutex
	serials   []*big.Int
	seen      chan struct{} // closed and replaced at each new serial
}

// startTLSBackend starts one; maxAge > 0 makes the server end each
// connection gracefully after that long, so that clients connect (and
// handshake) again.
func startTLSBackend(t *testing.T, name string, m *mesh, maxAge time.Duration) *tlsBackend {
	t.Helper()
	tb := &tlsBackend{backend: &backend{name: name}, seen: make(chan struct{})}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{m.server.TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    m.pki.Roots,
		MinVersion:   tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error {
			tb.sni.Store(cs.ServerName)
			if len(cs.PeerCertificates) > 0 {
				tb.record(cs.PeerCertificates[0].SerialNumber)
			}
			return nil
		},
	}
	opts := []grpc.ServerOption{grpc.Creds(credentials.NewTLS(cfg))}
	if maxAge > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: maxAge, MaxConnectionAgeGrace: 10 * time.Second}))
	}
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&greeterDesc, tb.backend)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tb.addr = lis.Addr().String()
	tb.port = uint32(lis.Addr().(*net.TCPAddr).Port)
	tb.srv = srv
	tb.wg.Add(1)
	go func() {
		defer tb.wg.Done()
		_ = srv.Serve(&sniffingListener{Listener: countingListener{lis, &tb.conns}, plaintext: &tb.plaintext})
	}()
	t.Cleanup(tb.stop)
	return tb
}

func (tb *tlsBackend) record(serial *big.Int) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, s := range tb.serials {
		if s.Cmp(serial) == 0 {
			return
		}
	}
	tb.serials = append(tb.serials, serial)
	close(tb.seen)
	tb.seen = make(chan struct{})
}

// waitSerial waits until the server has seen a client certificate of
// serial, and fails the test at ctx's deadline.
func (tb *tlsBackend) waitSerial(ctx context.Context, t *testing.T, serial *big.Int) {
	t.Helper()
	for {
		tb.mu.Lock()
		seen := tb.seen
		for _, s := range tb.serials {
			if s.Cmp(serial) == 0 {
				tb.mu.Unlock()
				return
			}
		}
		tb.mu.Unlock()
		select {
		case <-seen:
		case <-ctx.Done():
			t.Fatalf("the server never saw client certificate %v", serial)
		}
	}
}

// sniffingListener counts the connections whose first byte is not a TLS
// handshake record (0x16): a client that talks plaintext.
type sniffingListener struct {
	net.Listener
	plaintext *atomic.Int64
}

func (l *sniffingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffingConn{Conn: c, plaintext: l.plaintext}, nil
}

type sniffingConn struct {
	net.Conn
	plaintext *atomic.Int64
	once      sync.Once
}

func (c *sniffingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.once.Do(func() {
			if b[0] != 0x16 {
				c.plaintext.Add(1)
			}
		})
	}
	return n, err
}

// secureCluster is an EDS cluster whose UpstreamTlsContext takes the
// client certificate from instance identity ("" for none), the roots from
// instance roots, and checks the server's SANs with sans.
func secureCluster(t *testing.T, name, identity, roots string, sans ...*matcherv3.StringMatcher) *clusterv3.Cluster {
	t.Helper()
	c := testutils.Cluster(name, "")
	common := &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
		ValidationContext: &tlsv3.CertificateValidationContext{
			CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: roots},
			MatchSubjectAltNames:          sans,
		}}}
	if identity != "" {
		common.TlsCertificateProviderInstance = &tlsv3.CertificateProviderPluginInstance{InstanceName: identity}
	}
	tc, err := anypb.New(&tlsv3.UpstreamTlsContext{CommonTlsContext: common})
	if err != nil {
		t.Fatal(err)
	}
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tc}}
	return c
}

func exactSAN(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

// A cluster with mTLS: RPCs succeed over TLS with the client certificate,
// never in plaintext; a client certificate rotated on disk is presented on
// the next connection (the server ends each one after 200ms) and no RPC
// fails meanwhile.
func TestClusterMTLSAndRotation(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	e := newSecureEnv(t, m)
	a := startTLSBackend(t, "a", m, 200*time.Millisecond)
	e.update(tree(routes(toCluster(prefix("/"), "A")),
		[]*clusterv3.Cluster{secureCluster(t, "A", "id", "roots", exactSAN(serverSPIFFE))}, eds("A", a.backend)))
	conn := e.dial(xdsCreds(t))
	e.waitServed(conn, 1, func(string) bool { return true })
	a.waitSerial(e.ctx, t, m.client.Serial)

	stop := load(e.ctx, conn, 4)
	rotated := m.pki.Issue("client", testutils.CertOptions{Client: true})
	a.waitSerial(e.ctx, t, rotated.Serial)
	n, errs := stop()
	t.Logf("%d RPCs while the client certificate rotated; %d connections", n, a.conns.Load())
	if len(errs) > 0 {
		t.Errorf("%d RPCs failed during the rotation, the first: %v", len(errs), errs[0])
	}
	if n == 0 {
		t.Error("no RPC ran during the rotation")
	}
	if p := a.plaintext.Load(); p != 0 {
		t.Errorf("the server saw %d plaintext connections", p)
	}
}

// The server's SANs match none of the cluster's matchers: the handshake
// fails, RPCs fail with UNAVAILABLE, and the error names the SANs.
func TestClusterTLSSANMismatch(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	e := newSecureEnv(t, m)
	a := startTLSBackend(t, "a", m, 0)
	e.update(tree(routes(toCluster(prefix("/"), "A")),
		[]*clusterv3.Cluster{secureCluster(t, "A", "id", "roots", exactSAN("spiffe://goxds.test/ns/default/sa/other"))}, eds("A", a.backend)))
	conn := e.dial(xdsCreds(t))
	err := e.waitFailing(conn)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "URI:"+serverSPIFFE) ||
		!strings.Contains(err.Error(), "spiffe://goxds.test/ns/default/sa/other") {
		t.Errorf("RPC error = %v, want UNAVAILABLE naming the server's SAN and the matcher", err)
	}
	if p := a.plaintext.Load(); p != 0 {
		t.Errorf("the server saw %d plaintext connections", p)
	}
}

// A cluster whose TLS names a certificate provider instance the bootstrap
// does not define is never connected to: its RPCs fail with UNAVAILABLE
// naming the instance, and its server sees no connection at all, plaintext
// or other. A cluster without TLS on the same channel uses the fallback
// credentials (plaintext here).
func TestClusterTLSUndefinedInstance(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	e := newSecureEnv(t, m)
	a := startTLSBackend(t, "a", m, 0)
	plain := startBackend(t, "plain")
	toPlain := prefix("/")
	toPlain.Headers = []*routev3.HeaderMatcher{{Name: "x-plain", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}
	e.update(tree(routes(toCluster(toPlain, "P"), toCluster(prefix("/"), "A")),
		[]*clusterv3.Cluster{secureCluster(t, "A", "id", "undefined-roots"), testutils.Cluster("P", "")},
		eds("A", a.backend), eds("P", plain)))
	conn := e.dial(xdsCreds(t))
	if got, err := callWithHeader(e.ctx, conn, "x-plain", "1"); err != nil || got != "plain" {
		t.Fatalf("RPC to the cluster without TLS = %q, %v; want it served by plain", got, err)
	}
	err := e.waitFailing(conn)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `"undefined-roots"`) {
		t.Errorf("RPC error = %v, want UNAVAILABLE naming the undefined instance", err)
	}
	if c := a.conns.Load(); c != 0 {
		t.Errorf("the server of the cluster accepted %d connections, want none", c)
	}
}

// A channel whose credentials are not xdscreds uses its own for every
// cluster, one with TLS included, as grpc-go does: here plaintext reaches
// a plaintext server. The balancer warns once for the cluster, not at each
// update of it.
func TestClusterTLSWithoutXDSCreds(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	logger, sink := newLogSink()
	e := newSecureEnvLogging(t, m, logger)
	a, b := startBackend(t, "a"), startBackend(t, "b")
	e.update(tree(routes(toCluster(prefix("/"), "A")),
		[]*clusterv3.Cluster{secureCluster(t, "A", "id", "roots")}, eds("A", a)))
	conn := e.dial() // insecure channel credentials
	e.waitServed(conn, 1, func(name string) bool { return name == "a" })
	const warning = "the cluster asks for TLS, but the channel's credentials are not xdscreds: the channel's own are used"
	sink.want(e.ctx, t, slog.LevelWarn, warning, map[string]string{"cluster": "A"})
	// The cluster's endpoints change: it is rebuilt, and not warned of again.
	e.update(tree(routes(toCluster(prefix("/"), "A")),
		[]*clusterv3.Cluster{secureCluster(t, "A", "id", "roots")}, eds("A", b)))
	e.waitServed(conn, 1, func(name string) bool { return name == "b" })
	sink.mu.Lock()
	defer sink.mu.Unlock()
	n := 0
	for _, r := range sink.records {
		if r.msg == warning {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d warnings for the cluster's TLS, want 1", n)
	}
}

// A cluster with TLS but no identity certificate, to a server that
// requires one: the server refuses the handshake and RPCs fail with
// UNAVAILABLE; nothing is sent in plaintext.
func TestClusterTLSWithoutClientCertificate(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	e := newSecureEnv(t, m)
	a := startTLSBackend(t, "a", m, 0)
	e.update(tree(routes(toCluster(prefix("/"), "A")),
		[]*clusterv3.Cluster{secureCluster(t, "A", "", "roots", exactSAN(serverSPIFFE))}, eds("A", a.backend)))
	conn := e.dial(xdsCreds(t))
	err := e.waitFailing(conn)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("RPC error = %v, want UNAVAILABLE", err)
	}
	if a.conns.Load() == 0 {
		t.Error("the server saw no connection: the failure is not the server's refusal")
	}
	if p := a.plaintext.Load(); p != 0 {
		t.Errorf("the server saw %d plaintext connections", p)
	}
	t.Logf("RPC error without a client certificate: %v", err)
}

// A Builder given only a shared Client takes the certificate providers
// from the Client's bootstrap.
func TestClusterMTLSSharedClient(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	e := newSecureEnvWith(t, m, nil, true)
	a := startTLSBackend(t, "a", m, 0)
	e.update(tree(routes(toCluster(prefix("/"), "A")),
		[]*clusterv3.Cluster{secureCluster(t, "A", "id", "roots", exactSAN(serverSPIFFE))}, eds("A", a.backend)))
	conn := e.dial(xdsCreds(t))
	e.waitServed(conn, 1, func(string) bool { return true })
	a.waitSerial(e.ctx, t, m.client.Serial)
}

// auto_host_sni: the EDS endpoint's hostname is the SNI, and with
// auto_sni_san_validation the server certificate must be for it.
func TestClusterAutoHostSNI(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	e := newSecureEnv(t, m)
	a := startTLSBackend(t, "a", m, 0)
	withHost := func(host string) *endpointv3.ClusterLoadAssignment {
		cla := eds("A", a.backend)
		cla.Endpoints[0].LbEndpoints[0].GetEndpoint().Hostname = host
		return cla
	}
	c := secureCluster(t, "A", "id", "roots")
	u := new(tlsv3.UpstreamTlsContext)
	if err := c.TransportSocket.GetTypedConfig().UnmarshalTo(u); err != nil {
		t.Fatal(err)
	}
	u.Sni, u.AutoHostSni, u.AutoSniSanValidation = "fallback.goxds.test", true, true
	tc, err := anypb.New(u)
	if err != nil {
		t.Fatal(err)
	}
	c.TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: tc}

	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{c}, withHost(serverDNS)))
	conn := e.dial(xdsCreds(t))
	e.waitServed(conn, 1, func(string) bool { return true })
	if got, _ := a.sni.Load().(string); got != serverDNS {
		t.Errorf("server saw SNI %q, want the endpoint hostname %q", got, serverDNS)
	}

	// A hostname the certificate is not for: the new connection fails.
	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{c}, withHost("elsewhere.goxds.test")))
	err = e.waitFailing(conn)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "elsewhere.goxds.test") {
		t.Errorf("RPC error = %v, want UNAVAILABLE naming the SNI", err)
	}
}
