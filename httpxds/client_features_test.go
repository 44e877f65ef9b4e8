package httpxds_test

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

// Envoy's fault filter on the client's listener: an abort with the
// configured status and Envoy's body "fault filter abort"; a route whose
// typed_per_filter_config disables it is sent
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/fault_filter).
func TestClientFaultInjection(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "a")
	open := toCluster(prefix("/open"), "c", nil)
	open.TypedPerFilterConfig = map[string]*anypb.Any{"fault": testutils.MarshalAny(&routev3.FilterConfig{Disabled: true})}
	byHeader := toCluster(prefix("/header"), "c", nil)
	byHeader.TypedPerFilterConfig = map[string]*anypb.Any{"fault": testutils.MarshalAny(&faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
		ErrorType:  &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}},
		Percentage: &typev3.FractionalPercent{Numerator: 100},
	}})}
	e.update(world(routes("rc", open, byHeader, toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a}}, faultFilter(503)))
	e.want(e.get("/x"), 503, "fault filter abort")
	e.want(e.get("/open"), 200, "a GET /open")
	// x-envoy-fault-abort-request chooses the status of a header_abort.
	e.want(e.get("/header", "x-envoy-fault-abort-request: 429"), 429, "fault filter abort")
	if n := a.count(); n != 1 {
		t.Errorf("the backend got %d requests, want only the one the fault spared", n)
	}
}

// ring_hash with the route's hash policies: requests with the same
// header, cookie or query parameter value go to the same endpoint
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto#config-route-v3-routeaction-hashpolicy).
func TestClientRingHashPolicies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy *routev3.RouteAction_HashPolicy
		req    func(key string) (url string, headers []string)
	}{
		{"header", &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: "x-user"}}},
			func(k string) (string, []string) { return "/x", []string{"X-User: " + k} }},
		{"cookie", &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: "session"}}},
			func(k string) (string, []string) { return "/x", []string{"Cookie: session=" + k} }},
		{"query", &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_QueryParameter_{QueryParameter: &routev3.RouteAction_HashPolicy_QueryParameter{Name: "user"}}},
			func(k string) (string, []string) { return "/x?user=" + k, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCEnv(t, cenvOptions{})
			bs := []*backend{newBackend(t, "b0"), newBackend(t, "b1"), newBackend(t, "b2"), newBackend(t, "b3")}
			r := toCluster(prefix("/"), "c", func(ra *routev3.RouteAction) { ra.HashPolicy = []*routev3.RouteAction_HashPolicy{tc.policy} })
			res := world(routes("rc", r), map[string][]*backend{"c": bs})
			res.Clusters[0].LbPolicy = clusterv3.Cluster_RING_HASH
			e.update(res)
			seen := make(map[string]bool)
			for k := range 20 {
				key := "user-" + string(rune('a'+k))
				url, hdrs := tc.req(key)
				first := e.get(url, hdrs...)
				for range 5 {
					if got := e.get(url, hdrs...); got.body[:2] != first.body[:2] {
						t.Fatalf("key %s went to %q, then %q", key, first.body, got.body)
					}
				}
				seen[first.body[:2]] = true
			}
			if len(seen) < 2 {
				t.Errorf("20 keys all went to %v: the policy's values are not hashed", seen)
			}
		})
	}
}

// A cluster whose HttpProtocolOptions say explicit HTTP/2 is spoken to in
// h2c without TLS (prior knowledge)
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/upstreams/http/v3/http_protocol_options.proto).
func TestClientH2C(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackendWith(t, "a", func(s *http.Server) {
		s.Protocols = new(http.Protocols)
		s.Protocols.SetHTTP1(true)
		s.Protocols.SetUnencryptedHTTP2(true)
	})
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a}})
	res.Clusters[0].TypedExtensionProtocolOptions = h2cOptions()
	e.update(res)
	e.want(e.get("/x"), 200, "proto=HTTP/2.0")
}

const upstreamDNS = "backend.goxds.test"

// tlsWorld is a PKI, a bootstrap with its certificate providers ("id",
// the client certificate; "roots", the CA), and an mTLS backend.
type tlsWorld struct {
	pki    *testutils.PKI
	client testutils.Cert
	b      *backend
}

func newTLSWorld(t *testing.T) *tlsWorld {
	p := testutils.NewPKI(t)
	w := &tlsWorld{pki: p, client: p.Issue("client", testutils.CertOptions{Client: true, URIs: []string{"spiffe://goxds.test/client"}})}
	server := p.Issue("server", testutils.CertOptions{DNSNames: []string{upstreamDNS}})
	b := &backend{name: "tls"}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(b.serve))
	b.srv.TLS = &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.Roots}
	b.srv.EnableHTTP2 = true
	b.srv.StartTLS()
	t.Cleanup(b.srv.Close)
	b.port = uint32(b.srv.Listener.Addr().(*net.TCPAddr).Port)
	w.b = b
	return w
}

func (w *tlsWorld) providers(t *testing.T) func(*bootstrap.Config) {
	return func(cfg *bootstrap.Config) {
		js := func(v map[string]string) json.RawMessage {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		cfg.CertificateProviders = map[string]bootstrap.CertificateProvider{
			"id":    {PluginName: "file_watcher", Config: js(map[string]string{"certificate_file": w.client.CertFile, "private_key_file": w.client.KeyFile})},
			"roots": {PluginName: "file_watcher", Config: js(map[string]string{"ca_certificate_file": w.pki.CAFile})},
		}
	}
}

// secure gives c an UpstreamTlsContext: the client certificate from
// identity ("" for none), the roots from roots, the SAN matchers.
func secure(c *clusterv3.Cluster, identity, roots string, sans ...string) {
	common := &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
		ValidationContext: &tlsv3.CertificateValidationContext{
			CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: roots},
		}}}
	for _, s := range sans {
		vc := common.GetValidationContext()
		vc.MatchSubjectAltNames = append(vc.MatchSubjectAltNames, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}})
	}
	if identity != "" {
		common.TlsCertificateProviderInstance = &tlsv3.CertificateProviderPluginInstance{InstanceName: identity}
	}
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: testutils.MarshalAny(&tlsv3.UpstreamTlsContext{CommonTlsContext: common})}}
}

// A cluster's UpstreamTlsContext: requests go over mTLS with the
// provider's client certificate, the server's SANs checked against the
// matchers (gRFC A29's rules, as for gRPC); a SAN that does not match
// fails the request, never sent in plaintext; an instance the bootstrap
// does not define leaves the cluster without endpoints (503), never
// plaintext either.
func TestClientUpstreamMTLS(t *testing.T) {
	w := newTLSWorld(t)
	e := newCEnv(t, cenvOptions{edit: w.providers(t)})
	rc := routes("rc", toCluster(prefix("/good"), "good", nil), toCluster(prefix("/h2"), "h2", nil), toCluster(prefix("/badsan"), "badsan", nil), toCluster(prefix("/noinst"), "noinst", nil))
	res := world(rc, map[string][]*backend{"good": {w.b}, "h2": {w.b}, "badsan": {w.b}, "noinst": {w.b}})
	for _, c := range res.Clusters {
		switch c.Name {
		case "good":
			secure(c, "id", "roots", upstreamDNS)
		case "h2":
			secure(c, "id", "roots", upstreamDNS)
			c.TypedExtensionProtocolOptions = h2cOptions()
		case "badsan":
			secure(c, "id", "roots", "someone.else")
		case "noinst":
			secure(c, "id", "nowhere")
		}
	}
	e.update(res)
	got := e.get("/good")
	e.want(got, 200, "tls GET /good  host=svc.test proto=HTTP/1.1")
	// HTTP/2 by ALPN where the cluster's HttpProtocolOptions say so.
	e.want(e.get("/h2"), 200, "tls GET /h2  host=svc.test proto=HTTP/2.0")
	if r := w.b.last(); r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		t.Errorf("the backend saw no client certificate")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+svcHost+"/badsan", nil)
	if _, err := e.do(req); err == nil || !strings.Contains(err.Error(), "do not match any of the accepted SANs") {
		t.Errorf("SAN mismatch: got %v, want the SAN check's error", err)
	}
	e.want(e.get("/noinst"), 503, `cluster "noinst"`)
	if n := w.b.count(); n != 2 {
		t.Errorf("the backend served %d requests, want 2", n)
	}
}

// A route's idle_timeout ends a request whose response makes no progress
// for that long, with 504 before the response
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto#envoy-v3-api-field-config-route-v3-routeaction-idle-timeout).
func TestClientRouteIdleTimeout(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "a")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	a.handler = func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	r := toCluster(prefix("/"), "c", func(ra *routev3.RouteAction) { ra.IdleTimeout = durationpb.New(50 * time.Millisecond) })
	e.update(world(routes("rc", r), map[string][]*backend{"c": {a}}))
	e.want(e.get("/slow"), 504, "route idle_timeout 50ms")
}

// A host's watch is dropped once no request used it for HostIdleTimeout,
// and the next request watches it again.
func TestClientHostIdle(t *testing.T) {
	clock := testutils.NewFakeClock(time.Unix(1000, 0))
	e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) { o.Clock = clock; o.HostIdleTimeout = time.Minute }})
	a := newBackend(t, "a")
	e.update(world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a}}))
	e.want(e.get("/x"), 200, "a GET")
	clock.Advance(2 * time.Minute) // the sweep after one minute sees it unused only since then
	clock.Advance(2 * time.Minute)
	a.waitAllClosed(t, e.ctx)
	e.want(e.get("/y"), 200, "a GET /y")
}

// Close fails the requests waiting for a configuration, and those after.
func TestClientClose(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+svcHost+"/x", nil)
		_, err := e.do(req)
		errc <- err
	}()
	// Whether the request is waiting for the configuration yet or not,
	// Close must end it.
	e.tr.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, httpxds.ErrTransportClosed) {
			t.Errorf("waiting request: got %v, want ErrTransportClosed", err)
		}
	case <-e.ctx.Done():
		t.Fatal("a request waiting for the configuration was not ended by Close")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+svcHost+"/x", nil)
	if _, err := e.do(req); !errors.Is(err, httpxds.ErrTransportClosed) {
		t.Errorf("after Close: got %v, want ErrTransportClosed", err)
	}
}

// An https:// request to a cluster without TLS is refused, not sent in
// plaintext; to a cluster with TLS it is sent over it.
func TestClientHTTPSNeverDowngraded(t *testing.T) {
	w := newTLSWorld(t)
	e := newCEnv(t, cenvOptions{edit: w.providers(t)})
	a := newBackend(t, "a")
	res := world(routes("rc", toCluster(prefix("/tls"), "tls", nil), toCluster(prefix("/"), "plain", nil)), map[string][]*backend{"tls": {w.b}, "plain": {a}})
	for _, c := range res.Clusters {
		if c.Name == "tls" {
			secure(c, "id", "roots", upstreamDNS)
		}
	}
	e.update(res)
	e.want(e.get("https://"+svcHost+"/tls"), 200, "tls GET /tls")
	req, _ := http.NewRequest(http.MethodGet, "https://"+svcHost+"/plain", nil)
	if _, err := e.do(req); err == nil || !strings.Contains(err.Error(), `cluster "plain", which has no UpstreamTlsContext`) {
		t.Errorf("https to a plaintext cluster: got %v, want a refusal", err)
	}
	if n := a.count(); n != 0 {
		t.Errorf("the plaintext backend got %d requests", n)
	}
}
