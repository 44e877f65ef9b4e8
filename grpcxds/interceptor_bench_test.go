package grpcxds

import (
	"context"
	"errors"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// BenchmarkUnaryInterceptor measures the unary interceptor alone, with an
// invoker that sends nothing: what goxds adds to an RPC on its own
// goroutine (the configuration in force, routing, the route's deadline,
// the fault filter that does not fire, the retry bookkeeping), on the
// route of BenchmarkPerRPCSideBySide (internal/grpcparity).
func BenchmarkUnaryInterceptor(b *testing.B) {
	msd := 30 * time.Second
	r := &resources.Route{Prefix: "/", Action: resources.RouteActionRoute, Cluster: "c", RuntimeFraction: -1,
		MaxStreamDuration: &msd, RetryPolicy: &routev3.RetryPolicy{RetryOn: "unavailable", NumRetries: wrapperspb.UInt32(2)}}
	l := &resources.Listener{HTTPFilters: []resources.HTTPFilter{
		{Name: "fault", TypeURL: "type.googleapis.com/" + faultConfigName, Parsed: &resources.FaultConfig{Abort: &resources.FaultAbort{
			FromHeader: true, Percentage: resources.FaultFraction{Numerator: 100, Denominator: 100}}}},
		{Name: "router", TypeURL: "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router", Terminal: true},
	}}
	cc, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	cs := newChannelState(&Builder{})
	cs.owner = cc
	cs.set(&channelConfig{gen: 1, snap: &watchers.Snapshot{VirtualHost: &resources.VirtualHost{Routes: []*resources.Route{r}}, Listener: l}, chain: newFilterChain(l, filterEnv{})})
	invoker := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		// An error, not b.Fatal: the invoker runs in RunParallel's
		// goroutines, whose loop fails the benchmark with it.
		if selectionOf(ctx) == nil {
			return errors.New("no selection in the RPC's context")
		}
		return nil
	}
	req, reply := wrapperspb.String("hi"), new(wrapperspb.StringValue)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := cs.unary(ctx, "/goxds.bench.Echo/Echo", req, reply, cc, invoker); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
