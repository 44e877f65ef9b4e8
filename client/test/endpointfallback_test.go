package test

import (
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// gRFC A95: fallback_on_reachability_only and the client feature of
// LbEndpointCollection, against stock go-control-plane servers and the
// scriptable fake server.

// epAuthority serves the endpoints in these tests: an authority of their
// own, as the gRFC intends, so that only they fall back on reachability.
const epAuthority = "endpoints.example.com"

// epName is an assignment of epAuthority.
const epName = "xdstp://" + epAuthority + "/envoy.config.endpoint.v3.ClusterLoadAssignment/svc"

// newReachabilityEnv starts a primary serving epName at port 1001 and a
// fallback serving it at 2001, and a client whose authority epAuthority
// lists both, with fallback_on_reachability_only, and A95 on or off.
func newReachabilityEnv(t *testing.T, p protocol, a95 bool) (c *client.Client, primary, fallback *testutils.ManagementServer) {
	t.Helper()
	start := func(port uint32) *testutils.ManagementServer {
		ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ms.Stop)
		rs := testutils.Resources{Endpoints: []*endpointv3.ClusterLoadAssignment{testutils.ClusterLoadAssignment(epName, "127.0.0.1", port)}}
		if err := ms.Update(testContext(t), nodeID, rs); err != nil {
			t.Fatal(err)
		}
		return ms
	}
	primary, fallback = start(1001), start(2001)
	b, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: primary.Address(),
		APIType:   p.apiType,
		NodeID:    nodeID,
		Authorities: map[string]testutils.BootstrapAuthority{epAuthority: {
			Servers: []testutils.BootstrapServer{
				{URI: primary.Address(), APIType: p.apiType},
				{URI: fallback.Address(), APIType: p.apiType},
			},
			FallbackOnReachabilityOnly: true,
		}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	b.EndpointFallback = a95
	c, err = client.New(b, client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // before the servers stop
	return c, primary, fallback
}

// With fallback_on_reachability_only, an authority whose every watched
// resource is cached still leaves a primary it cannot reach: the watcher
// gets the fallback's endpoints, and is not told of the failure the
// fallback covers (gRFC A95, "fallback when the primary server is
// unreachable, even if we do not have any uncached resources").
func TestFallbackOnReachabilityOnly(t *testing.T) {
	forEachProtocol(t, everyProtocol, func(t *testing.T, p protocol) {
		t.Parallel()
		c, primary, fallback := newReachabilityEnv(t, p, true)
		w := newRecorder[*resources.Endpoints]()
		client.WatchEndpoints(c, epName, w)
		wantAddresses(t, w.wantUpdate(t, epName), "127.0.0.1:1001")
		barrier(t, c)

		primary.Stop()
		wantAddresses(t, w.wantUpdate(t, epName), "127.0.0.1:2001")
		barrier(t, c)
		w.none(t)
		if st, ok := status(c, edsURL, epName); !ok || st.Server != fallback.Address() {
			t.Errorf("dump: %+v, want the assignment from the fallback %s", st, fallback.Address())
		}

		// The primary back (gRFC A71's return, which A95 keeps): its
		// first response makes it current again.
		back, err := testutils.StartManagementServer(testutils.ManagementServerOptions{Address: primary.Address()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(back.Stop)
		rs := testutils.Resources{Endpoints: []*endpointv3.ClusterLoadAssignment{testutils.ClusterLoadAssignment(epName, "127.0.0.1", 1003)}}
		if err := back.Update(testContext(t), nodeID, rs); err != nil {
			t.Fatal(err)
		}
		wantAddresses(t, w.wantUpdate(t, epName), "127.0.0.1:1003")
		if st, ok := status(c, edsURL, epName); !ok || st.Server != back.Address() {
			t.Errorf("dump: %+v, want the assignment from the primary %s again", st, back.Address())
		}
	})
}

// Without A95 on (GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK unset), the knob
// is ignored: with everything cached, a lost primary is an ambient error
// and the fallback is never contacted (gRFC A71).
func TestFallbackOnReachabilityOnlyNeedsA95(t *testing.T) {
	forEachProtocol(t, everyProtocol, func(t *testing.T, p protocol) {
		t.Parallel()
		c, primary, fallback := newReachabilityEnv(t, p, false)
		w := newRecorder[*resources.Endpoints]()
		client.WatchEndpoints(c, epName, w)
		wantAddresses(t, w.wantUpdate(t, epName), "127.0.0.1:1001")

		primary.Stop()
		w.wantError(t, "ambient-error", client.ErrServerUnavailable, epName)
		barrier(t, c)
		if n := fallback.Counters(); n.Streams+n.DeltaStreams != 0 {
			t.Fatalf("%d streams to the fallback with everything cached and A95 off", n.Streams+n.DeltaStreams)
		}
	})
}

// The node advertises xds.endpoint.supports_lb_endpoint_collection with
// A95 on, and not without: the first request of a stream, exactly.
func TestLbEndpointCollectionClientFeature(t *testing.T) {
	for _, a95 := range []bool{true, false} {
		e := newFakeEnv(t, sotw, config{endpointFallback: a95})
		client.WatchEndpoints(e.c, "E1", newRecorder[*resources.Endpoints]())
		features := clientFeatures
		if a95 {
			features = append(features[:len(features):len(features)], "xds.endpoint.supports_lb_endpoint_collection")
		}
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{
			Node:          bootstrap.Node{ID: nodeID}.Proto(features),
			TypeUrl:       edsURL,
			ResourceNames: []string{"E1"},
		})
	}
}
