package grpcxds_test

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/goxds/xds/resources"
)

// gRFC A105: max_connections_per_subchannel may change with each update,
// and the subchannel is kept, not made again. Here an endpoint with one
// connection open (the setting unset: one) gets max_connections 3 on the
// same channel: the connection stays, and three RPCs against a server
// allowing one stream per connection then run at once, over it and two
// new ones.
func TestConnectionScalingRaised(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	sb := startStreamsBackend(t, "b", 1)
	other := startBackend(t, "other")
	e := newEnv(t)
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{perHostCluster("c", 0, false)}, eds("c", sb.backend)))
	conn := e.dial()
	errs := startRPCs(e.ctx, conn, 1)
	sb.waitArrived(t, e.ctx, 1, "unset")
	finish(t, e.ctx, sb, errs, 1)

	// max_connections 3, and the cluster's endpoints from another
	// assignment that adds a backend: once it serves, the new Cluster is
	// in force (one resource, applied whole). Then the assignment without
	// it: once every RPC goes to b, that is in force too. RPCs one at a
	// time meanwhile, answered at once: nothing to scale for.
	hold := sb.handler.Load()
	sb.handler.Store(nil)
	raised := perHostCluster("c", 3, true)
	raised.GetEdsClusterConfig().ServiceName = "c2"
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{raised}, eds("c2", sb.backend, other)))
	e.waitServed(conn, 1, func(name string) bool { return name == "other" })
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{raised}, eds("c2", sb.backend)))
	e.waitServed(conn, 20, func(name string) bool { return name == "b" })
	if n := sb.conns.Load(); n != 1 {
		t.Fatalf("%d connections before the RPCs that need more, want the first one only", n)
	}

	sb.handler.Store(hold)
	errs = startRPCs(e.ctx, conn, 3)
	sb.waitArrived(t, e.ctx, 3, "max_connections raised to 3")
	finish(t, e.ctx, sb, errs, 3)
	if n, closed := sb.conns.Load(), sb.closed.Load(); n != 3 || closed != 0 {
		t.Errorf("%d connections made, %d closed; want 3 (the first kept, two added), none closed", n, closed)
	}
}
