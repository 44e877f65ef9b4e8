package grpcxds_test

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goxds/xds/grpcxds"
)

// What the per-RPC interceptors cost: unary RPCs to a backend on
// 127.0.0.1 through a channel made with DialOptions (route chosen once,
// retry policy, a fault filter that never fires), against one made with
// the resolver alone.
func BenchmarkPerRPC(b *testing.B) {
	e := newEnvWith(b, grpcxds.Options{Logger: quietLogger})
	a := startBackend(b, "a")
	r := withRetry(toCluster(prefix("/"), "A"), retryPolicy("unavailable", 2, 0, 0))
	res := tree(routes(r), clusters("A"), eds("A", a))
	res.Listeners = []*listenerv3.Listener{listenerWithFilters(b, faultFilter("fault", headerAbort(), false))}
	e.update(res)
	for _, tc := range []struct {
		name string
		opts func() []grpc.DialOption // once per channel
	}{
		{"interceptors", e.builder.DialOptions},
		{"resolver-only", func() []grpc.DialOption { return []grpc.DialOption{grpc.WithResolvers(e.builder)} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			conn, err := grpc.NewClient("goxds:///"+listener, append(tc.opts(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := call(e.ctx, conn); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
