package httpxds_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

// ExampleNewClient sends requests through an http.Client whose routes,
// clusters and endpoints come from a management server (go-control-plane's
// stock server, from testutils): the URL's host names the Listener, and
// a route sends /v1/ to a cluster of one backend, rewriting the prefix.
func ExampleNewClient() {
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer ms.Stop()
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: "example"}))
	if err != nil {
		log.Fatal(err)
	}

	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "backend got %s", r.URL.Path)
	}))
	defer backend.Close()
	port := uint32(backend.Listener.Addr().(*net.TCPAddr).Port)

	// The management server's side: the Listener "users.svc:8080" (the
	// bootstrap's default template is "%s"), its routes, the cluster and
	// its endpoint.
	rc := &routev3.RouteConfiguration{Name: "users-routes", VirtualHosts: []*routev3.VirtualHost{{
		Name: "users", Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/v1/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "users-v1"},
				PrefixRewrite:    "/",
			}},
		}},
	}}}
	err = ms.Update(context.Background(), "example", testutils.Resources{
		Listeners: []*listenerv3.Listener{testutils.ListenerInlineRoute("users.svc:8080", rc)},
		Clusters:  []*clusterv3.Cluster{testutils.Cluster("users-v1", "")},
		Endpoints: []*endpointv3.ClusterLoadAssignment{testutils.ClusterLoadAssignment("users-v1", "127.0.0.1", port)},
	})
	if err != nil {
		log.Fatal(err)
	}

	hc, tr, err := httpxds.NewClient(httpxds.TransportOptions{Bootstrap: cfg})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	// The first request waits for the configuration.
	resp, err := hc.Get("http://users.svc:8080/v1/users/42")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(b))
	// Output: 200 OK backend got /users/42
}
