package test

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// hostRewriteRoutes is a route configuration whose one route asks for
// auto_host_rewrite (gRFC A81).
func hostRewriteRoutes(name string) *routev3.RouteConfiguration {
	rc := testutils.RouteConfig(name, "*", "C1")
	rc.VirtualHosts[0].Routes[0].GetRoute().HostRewriteSpecifier = &routev3.RouteAction_AutoHostRewrite{AutoHostRewrite: wrapperspb.Bool(true)}
	return rc
}

// serveRoutes waits on fs for the request of route configuration R1,
// answers with hostRewriteRoutes("R1") and waits for the ACK.
func serveRoutes(t *testing.T, fs *testutils.FakeServer, nonce string) {
	t.Helper()
	for {
		r, err := fs.NextRequest(testContext(t))
		if err != nil {
			t.Fatalf("waiting for the request of R1: %v", err)
		}
		if r.GetTypeUrl() == rdsURL && len(r.GetResourceNames()) == 1 && r.GetResourceNames()[0] == "R1" && r.GetResponseNonce() == "" {
			break
		}
	}
	if err := fs.Send(testutils.SotWResponse(rdsURL, "1", nonce, hostRewriteRoutes("R1"))); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := fs.NextRequest(testContext(t))
		if err != nil {
			t.Fatalf("waiting for the ACK of %s: %v", nonce, err)
		}
		if r.GetResponseNonce() == nonce {
			if r.GetErrorDetail() != nil {
				t.Fatalf("R1 NACKed: %v", r.GetErrorDetail())
			}
			return
		}
	}
}

// A route's auto_host_rewrite is honoured only from a server marked
// trusted_xds_server (gRFC A81). The same bytes from the untrusted
// fallback and then from the trusted primary are two values: the client
// decodes them again when the primary is back, and delivers the route
// that rewrites.
func TestAutoHostRewriteFollowsTheSendersTrust(t *testing.T) {
	t.Parallel()
	s := newTwoFakeServers(t)
	var err error
	s.b, err = bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI:       s.paddr,
		APIType:         sotw.apiType,
		ServerFeatures:  []string{bootstrap.FeatureTrustedXDSServer},
		FallbackServers: []testutils.BootstrapServer{{URI: s.fallback.Address(), APIType: sotw.apiType}},
		NodeID:          nodeID,
	}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(s.b, client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w := newRecorder[*resources.RouteConfig]()
	client.WatchRouteConfig(c, "R1", w)

	rewrites := func(rc *resources.RouteConfig) bool { return rc.VirtualHosts[0].Routes[0].AutoHostRewrite }
	serveRoutes(t, s.fallback, "f1")
	if rc := w.wantUpdate(t, "R1"); rewrites(rc) {
		t.Fatal("R1 from the untrusted fallback: the route rewrites the authority")
	}

	s.startPrimary()
	serveRoutes(t, s.primary, "p1")
	if rc := w.wantUpdate(t, "R1"); !rewrites(rc) {
		t.Fatal("R1 from the trusted primary: the route does not rewrite the authority")
	}
}
