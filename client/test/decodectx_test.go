package test

import (
	"encoding/json"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Decoders know where a resource came from (resources.DecodeContext): the
// client's bootstrap, its registry, and the server that sent each resource.

// tlsCluster is an EDS cluster whose UpstreamTlsContext takes its identity
// from the certificate provider instance identity and its roots from
// roots.
func tlsCluster(name, identity, roots string) *clusterv3.Cluster {
	c := testutils.Cluster(name, "")
	tls := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: identity},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: roots},
		}},
	}}
	c.TransportSocket = &corev3.TransportSocket{
		Name:       "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: testutils.MarshalAny(tls)},
	}
	return c
}

// A Cluster naming a certificate provider instance the bootstrap does not
// define is NACKed (gRFC A29), in grpc-go's words, which name the instance,
// followed by goxds's detail: where, and what the bootstrap does define.
// The same Cluster naming the defined instance is accepted.
func TestClusterNamingUndefinedCertificateProviderIsNACKed(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{certProviders: map[string]bootstrap.CertificateProvider{
			"defined": {PluginName: "file_watcher", Config: json.RawMessage(`{"ca_certificate_file":"/ca.pem"}`)},
		}})
		w := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, "C1", w)
		e.reply(p)

		e.respond(p, cdsURL, "n1", res("C1", "1", tlsCluster("C1", "undefined", "defined")))
		const want = `Cluster "C1": transport_socket.typed_config.common_tls_context: ` +
			`identity certificate provider instance name "undefined" missing in bootstrap configuration ` +
			`(the bootstrap's certificate_providers defines "defined")`
		var detail string
		if p.delta {
			r := e.deltaReq()
			wantNACK(t, r, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "n1"})
			detail = r.GetErrorDetail().GetMessage()
		} else {
			r := e.req()
			wantNACK(t, r, &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1"}, ResponseNonce: "n1"})
			detail = r.GetErrorDetail().GetMessage()
		}
		if detail != want {
			t.Fatalf("NACK error_detail:\n got %q\nwant %q", detail, want)
		}
		w.wantError(t, "resource-error", client.ErrResourceInvalid, "C1")

		// The roots too; then both defined, accepted.
		e.respond(p, cdsURL, "n2", res("C1", "2", tlsCluster("C1", "defined", "undefined")))
		if p.delta {
			wantNACK(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "n2"},
				`root certificate provider instance name "undefined" missing in bootstrap configuration`)
		} else {
			wantNACK(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1"}, ResponseNonce: "n2"},
				`root certificate provider instance name "undefined" missing in bootstrap configuration`)
		}
		w.wantError(t, "resource-error", client.ErrResourceInvalid, "C1")
		e.respond(p, cdsURL, "n3", res("C1", "3", tlsCluster("C1", "defined", "defined")))
		e.reply(p)
		if c := w.wantUpdate(t, "C1"); c.Security == nil || c.Security.IdentityInstance != "defined" {
			t.Fatalf("accepted cluster's Security = %+v, want identity from \"defined\"", c.Security)
		}
	})
}

// customFilterURL is the config type of a filter only one client knows.
const customFilterURL = "type.googleapis.com/google.protobuf.StringValue"

// routeWithOverride is a route configuration whose virtual host has a
// typed_per_filter_config entry for the custom filter.
func routeWithOverride(name string) *routev3.RouteConfiguration {
	rc := testutils.RouteConfig(name, "*", "C1")
	cfg, err := anypb.New(wrapperspb.String("custom"))
	if err != nil {
		panic(err)
	}
	rc.VirtualHosts[0].TypedPerFilterConfig = map[string]*anypb.Any{"custom": cfg}
	return rc
}

// Two clients of one process with different filter registries validate
// the same RouteConfiguration differently: the one whose registry has the
// custom filter accepts its override, the other (the default registry)
// NACKs it. Registering into one client's registry changes neither the
// default nor the other client.
func TestClientsValidateWithTheirOwnFilters(t *testing.T) {
	t.Parallel()
	reg := resources.DefaultRegistry().Clone()
	err := reg.RegisterHTTPFilter(resources.HTTPFilterType{
		Name:     "custom",
		TypeURLs: []string{customFilterURL},
		ParseConfig: func(a *anypb.Any) (resources.HTTPFilterConfig, error) {
			return a.GetTypeUrl(), nil
		},
		ParseOverride: func(a *anypb.Any) (resources.HTTPFilterConfig, error) {
			v := new(wrapperspb.StringValue)
			err := a.UnmarshalTo(v)
			return v.GetValue(), err
		},
		ClientSide: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resources.LookupHTTPFilter(customFilterURL); ok {
		t.Fatal("registering into a clone registered into the default registry")
	}
	with := newFakeEnv(t, sotw, config{registry: reg})
	without := newFakeEnv(t, sotw, config{})
	var got []*recorder[*resources.RouteConfig]
	for _, e := range []*fakeEnv{with, without} {
		w := newRecorder[*resources.RouteConfig]()
		client.WatchRouteConfig(e.c, "R1", w)
		e.reply(sotw)
		e.respond(sotw, rdsURL, "n1", res("R1", "1", routeWithOverride("R1")))
		got = append(got, w)
	}
	// The client with the filter ACKs and delivers the parsed override.
	wantReq(t, with.req(), &discoveryv3.DiscoveryRequest{TypeUrl: rdsURL, VersionInfo: "vn1", ResourceNames: []string{"R1"}, ResponseNonce: "n1"})
	if rc := got[0].wantUpdate(t, "R1"); rc.VirtualHosts[0].FilterOverrides["custom"] != "custom" {
		t.Fatalf("override parsed as %#v, want \"custom\"", rc.VirtualHosts[0].FilterOverrides["custom"])
	}
	// The other NACKs it, naming the filter and its type.
	wantNACK(t, without.req(), &discoveryv3.DiscoveryRequest{TypeUrl: rdsURL, ResourceNames: []string{"R1"}, ResponseNonce: "n1"},
		`override for filter "custom" has unknown type google.protobuf.StringValue and is not optional`)
	got[1].wantError(t, "resource-error", client.ErrResourceInvalid, "R1")
}

// lrsCluster is an EDS cluster reporting load to the server that sends it.
func lrsCluster(name string) *clusterv3.Cluster {
	c := testutils.Cluster(name, "")
	c.LrsServer = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Self{Self: &corev3.SelfConfigSource{}}}
	return c
}

// twoFakeServers is a primary and a fallback, both FakeServers, the primary
// at paddr (held, down, until started).
type twoFakeServers struct {
	t        *testing.T
	paddr    string
	held     *portHolder
	primary  *testutils.FakeServer
	fallback *testutils.FakeServer
	b        *bootstrap.Config
}

func newTwoFakeServers(t *testing.T) *twoFakeServers {
	t.Helper()
	fb, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fb.Stop)
	s := &twoFakeServers{t: t, fallback: fb, held: holdPort(t, "127.0.0.1:0")}
	s.paddr = s.held.lis.Addr().String()
	t.Cleanup(func() {
		if s.held != nil {
			s.held.release()
		}
	})
	s.b, err = bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI:       s.paddr,
		APIType:         sotw.apiType,
		FallbackServers: []testutils.BootstrapServer{{URI: fb.Address(), APIType: sotw.apiType}},
		NodeID:          nodeID,
	}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startPrimary starts the primary in the held port's place.
func (s *twoFakeServers) startPrimary() {
	s.t.Helper()
	s.held.release()
	s.held = nil
	ps, err := testutils.StartFakeServer(testutils.FakeServerOptions{Address: s.paddr})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(ps.Stop)
	s.primary = ps
}

// serveCluster waits on fs for the request of C1, answers with
// lrsCluster("C1") and waits for the ACK.
func serveCluster(t *testing.T, fs *testutils.FakeServer, nonce string) {
	t.Helper()
	for {
		r, err := fs.NextRequest(testContext(t))
		if err != nil {
			t.Fatalf("waiting for the request of C1: %v", err)
		}
		if r.GetTypeUrl() == cdsURL && len(r.GetResourceNames()) == 1 && r.GetResourceNames()[0] == "C1" && r.GetResponseNonce() == "" {
			break
		}
	}
	if err := fs.Send(testutils.SotWResponse(cdsURL, "1", nonce, lrsCluster("C1"))); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := fs.NextRequest(testContext(t))
		if err != nil {
			t.Fatalf("waiting for the ACK of %s: %v", nonce, err)
		}
		if r.GetResponseNonce() == nonce {
			if r.GetErrorDetail() != nil {
				t.Fatalf("C1 NACKed: %v", r.GetErrorDetail())
			}
			return
		}
	}
}

func wantLRSServer(t *testing.T, c *resources.Cluster, uri string) {
	t.Helper()
	if !c.LRSServerSelf || c.LRSServer == nil || c.LRSServer.ServerURI != uri {
		var got string
		if c.LRSServer != nil {
			got = c.LRSServer.ServerURI
		}
		t.Fatalf("cluster %s: LRSServerSelf %v, LRSServer %q; want %q", c.Name, c.LRSServerSelf, got, uri)
	}
}

// lrs_server "self" names the server that sent the Cluster: the fallback
// while it serves (gRFC A71), the primary once the client is back on it,
// although the primary sends the same bytes: a value that depends on its
// source is decoded again, and delivered, when its source changes.
func TestLRSServerSelfIsTheServerThatSentTheCluster(t *testing.T) {
	t.Parallel()
	s := newTwoFakeServers(t)
	c, err := client.New(s.b, client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w := newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "C1", w)

	serveCluster(t, s.fallback, "f1")
	wantLRSServer(t, w.wantUpdate(t, "C1"), s.fallback.Address())

	s.startPrimary()
	serveCluster(t, s.primary, "p1")
	wantLRSServer(t, w.wantUpdate(t, "C1"), s.paddr)
}

// A value read back from the last-known-good directory is decoded in the
// context of the server that sent it, not of the server that now serves its
// name: a Cluster the fallback sent, served from disk while the primary is
// up but silent, reports load to the fallback. Written again (the primary
// sends another Cluster, and the type's file is rewritten), it stays the
// fallback's for the next run.
func TestPersistedClusterIsDecodedAsItsServerSentIt(t *testing.T) {
	t.Parallel()
	s := newTwoFakeServers(t)
	dir := t.TempDir()
	start := func() (*client.Client, *testutils.FakeClock, *diskRecorder[*resources.Cluster]) {
		clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
		c, err := client.New(s.b, client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: testLogger(),
			Clock: clk, Persist: client.PersistOptions{Dir: dir, Wait: persistWait}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		w := newDiskRecorder[*resources.Cluster]()
		client.WatchCluster(c, "C1", w)
		return c, clk, w
	}

	// The first run falls back: C1 comes from the fallback.
	c, _, w := start()
	serveCluster(t, s.fallback, "f1")
	wantLRSServer(t, w.wantUpdateFrom(t, "C1", false), s.fallback.Address())
	c.Close()

	// The second: the primary is up and says nothing of C1, so the client
	// stays on it; once the wait is over, C1 is served from disk. Then
	// the primary sends C2 (a SotW response without C1, which leaves a
	// value from disk alone), and the Cluster file is written again.
	s.startPrimary()
	c, clk, w := start()
	w2 := newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "C2", w2)
	clk.Advance(persistWait)
	wantLRSServer(t, w.wantUpdateFrom(t, "C1", true), s.fallback.Address())
	for {
		r, err := s.primary.NextRequest(testContext(t))
		if err != nil {
			t.Fatalf("waiting for the primary's request of C2: %v", err)
		}
		if r.GetTypeUrl() == cdsURL && len(r.GetResourceNames()) == 2 {
			break
		}
	}
	if err := s.primary.Send(testutils.SotWResponse(cdsURL, "1", "p1", lrsCluster("C2"))); err != nil {
		t.Fatal(err)
	}
	wantLRSServer(t, w2.wantUpdate(t, "C2"), s.paddr)
	c.Close() // writes the file

	// The third: C1 from disk is the fallback's still.
	c, clk, w = start()
	clk.Advance(persistWait)
	wantLRSServer(t, w.wantUpdateFrom(t, "C1", true), s.fallback.Address())
	c.Close()
}
