package httpxds_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

// Example serves an http.Handler configured by a management server
// (go-control-plane's stock server, from testutils): the Listener for the
// address, its route configuration, then a request.
func Example() {
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer ms.Stop()
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: "example"}))
	if err != nil {
		log.Fatal(err)
	}
	cfg.ServerListenerResourceNameTemplate = "http/server?listening_address=%s"

	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from "+r.URL.Path) })
	serving := make(chan struct{}, 1)
	srv, err := httpxds.NewServer(mux, httpxds.Options{
		Bootstrap: cfg,
		ServingModeCallback: func(_ net.Addr, args httpxds.ServingModeChangeArgs) {
			if args.Mode == httpxds.ServingModeServing {
				serving <- struct{}{}
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(lis)

	// The management server's side: the Listener the template names for
	// the address, one filter chain whose routes serve every path with
	// the handler (non_forwarding_action).
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "routes",
			VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
			}}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(&routerv3.Router{})}}},
	}
	l := &listenerv3.Listener{
		Name: fmt.Sprintf(cfg.ServerListenerResourceNameTemplate, lis.Addr()),
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(lis.Addr().(*net.TCPAddr).Port)},
		}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: testutils.MarshalAny(hcm)},
		}}}},
	}
	if err := ms.Update(context.Background(), "example", testutils.Resources{Listeners: []*listenerv3.Listener{l}}); err != nil {
		log.Fatal(err)
	}
	<-serving

	// The path is normalized before routing, and the handler is served
	// the normalized one.
	resp, err := http.Get("http://" + lis.Addr().String() + "/./hello")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, strings.TrimSpace(string(b)))
	// Output: 200 OK hello from /hello
}
