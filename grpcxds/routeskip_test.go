package grpcxds_test

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A route gRPC cannot use is skipped, not fatal (gRFC A28): RPCs go to the
// next route that matches; with every route skipped, no route matches.
func TestSkippedRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	byHeader := &routev3.Route{Match: prefix("/"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"},
	}}}
	e.update(tree(routes(byHeader, toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	conn := e.dial()
	e.waitServed(conn, 3, func(b string) bool { return b == "a" })

	e.update(tree(routes(byHeader), clusters("A"), eds("A", a)))
	err := e.waitFailing(conn)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no route matches RPC "+sayHello) {
		t.Errorf("RPC with every route skipped: %v; want UNAVAILABLE, no route matches", err)
	}
}
