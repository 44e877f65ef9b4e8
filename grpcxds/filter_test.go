package grpcxds_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// abortAll is a fault filter config that aborts every RPC with code.
func abortAll(code codes.Code) *anypb.Any {
	return testutils.MarshalAny(&faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
		ErrorType:  &faultv3.FaultAbort_GrpcStatus{GrpcStatus: uint32(code)},
		Percentage: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
	}})
}

// headerAbort is a fault filter config whose aborts the RPC's headers ask
// for.
func headerAbort() *anypb.Any {
	return testutils.MarshalAny(&faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
		ErrorType:  &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}},
		Percentage: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
	}})
}

// listenerWithFilters is the test listener with filters before its router.
func listenerWithFilters(t testing.TB, filters ...*hcmv3.HttpFilter) *listenerv3.Listener {
	t.Helper()
	l := testutils.Listener(listener, "greeter-route")
	hcm := new(hcmv3.HttpConnectionManager)
	if err := l.ApiListener.ApiListener.UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	hcm.HttpFilters = append(filters, hcm.HttpFilters...)
	l.ApiListener.ApiListener = testutils.MarshalAny(hcm)
	return l
}

func faultFilter(name string, cfg *anypb.Any, disabled bool) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: name, Disabled: disabled, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: cfg}}
}

func disabledOverride() *anypb.Any {
	return testutils.MarshalAny(&routev3.FilterConfig{Disabled: true})
}

// The listener's HTTP filters run on each RPC (gRFC A39) with the fault
// filter's runtime (gRFC A33): an abort at 100% fails every RPC with its
// code and none reaches a server; the most specific typed_per_filter_config
// wins (weighted cluster, then route, then virtual host, then the
// filter's own); an override can switch a filter off, and a filter
// disabled in the listener runs only where an override switches it on.
// Filters run in order: the first abort wins.
func TestFaultFilterChain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	path := func(p string) *routev3.RouteMatch {
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: p}}
	}
	withOverride := func(r *routev3.Route, filter string, o *anypb.Any) *routev3.Route {
		r.TypedPerFilterConfig = map[string]*anypb.Any{filter: o}
		return r
	}
	wcOverride := weighted(path("/goxds.test.Greeter/Chat"), testutils.ClusterWeight{Name: "A", Weight: 1})
	wcOverride.GetRoute().GetWeightedClusters().Clusters[0].TypedPerFilterConfig = map[string]*anypb.Any{"fault-1": abortAll(codes.ResourceExhausted)}
	wcOverride.TypedPerFilterConfig = map[string]*anypb.Any{"fault-1": abortAll(codes.Internal)}
	rc := routes(
		withOverride(toCluster(path("/goxds.test.Greeter/SayHello"), "A"), "fault-1", abortAll(codes.Unavailable)),
		wcOverride,
		withOverride(toCluster(path("/goxds.test.Greeter/Off"), "A"), "fault-1", disabledOverride()),
		toCluster(prefix("/"), "A"),
	)
	rc.VirtualHosts[0].TypedPerFilterConfig = map[string]*anypb.Any{"fault-1": abortAll(codes.Aborted)}
	res := tree(rc, clusters("A"), eds("A", a))
	res.Listeners = []*listenerv3.Listener{listenerWithFilters(t,
		faultFilter("fault-1", abortAll(codes.PermissionDenied), false),
		faultFilter("fault-2", abortAll(codes.DataLoss), false))}
	e.update(res)
	conn := e.dial()

	invoke := func(method string) error {
		return conn.Invoke(e.ctx, method, wrapperspb.String("hi"), new(wrapperspb.StringValue), grpc.WaitForReady(true))
	}
	for _, tc := range []struct {
		method string
		want   codes.Code
	}{
		{"/goxds.test.Greeter/SayHello", codes.Unavailable},   // the route's override
		{"/goxds.test.Greeter/Chat", codes.ResourceExhausted}, // the weighted cluster's
		{"/goxds.test.Greeter/Off", codes.DataLoss},           // fault-1 off: fault-2 aborts
		{"/goxds.test.Greeter/Other", codes.Aborted},          // the virtual host's
	} {
		if err := invoke(tc.method); status.Code(err) != tc.want || !strings.Contains(err.Error(), "fault injected") {
			t.Errorf("RPC %s: %v; want %v from the fault filter", tc.method, err, tc.want)
		}
	}
	if n := a.rpcs.Load(); n != 0 {
		t.Errorf("%d RPCs reached the backend; want none", n)
	}

	// fault-2 disabled in the listener, switched on by the route's
	// override only; fault-1 has a header-controlled abort.
	offRoute := withOverride(toCluster(path("/goxds.test.Greeter/SayHello"), "A"), "fault-2", abortAll(codes.Unavailable))
	res = tree(routes(offRoute, toCluster(prefix("/"), "A")), clusters("A"), eds("A", a))
	res.Listeners = []*listenerv3.Listener{listenerWithFilters(t,
		faultFilter("fault-1", headerAbort(), false),
		faultFilter("fault-2", abortAll(codes.DataLoss), true))}
	e.update(res)
	// Streams succeed once the new configuration is in force: fault-2
	// stays off on their route, and fault-1 aborts only when asked.
	waitFor(t, e.ctx, func() bool { _, err := chat(e.ctx, conn, 1); return err == nil })
	if err := invoke("/goxds.test.Greeter/SayHello"); status.Code(err) != codes.Unavailable {
		t.Errorf("RPC on the route that switches fault-2 on: %v; want UNAVAILABLE", err)
	}
	ctx := metadata.AppendToOutgoingContext(e.ctx, "x-envoy-fault-abort-grpc-request", "8")
	if _, err := call(ctx, conn); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("RPC asking for an abort by header on the override's route: %v; want RESOURCE_EXHAUSTED: fault-1 runs before fault-2", err)
	}
	ctx = metadata.AppendToOutgoingContext(e.ctx, "x-envoy-fault-abort-grpc-request", "8")
	if _, err := chat(ctx, conn, 1); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("stream asking for an abort by header: %v; want RESOURCE_EXHAUSTED", err)
	}
	// An abort with status OK ends a stream at once with no message.
	ctx = metadata.AppendToOutgoingContext(e.ctx, "x-envoy-fault-abort-grpc-request", "0")
	s, err := conn.NewStream(ctx, chatDesc, "/goxds.test.Greeter/Chat")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
		t.Errorf("stream aborted with OK: RecvMsg says %v; want io.EOF", err)
	}
}

// max_active_faults caps the faults of the whole process (gRFC A33, as
// grpc-go counts them): with a cap of 1 and one RPC being delayed on one
// channel, an RPC of another channel gets no fault. Not parallel: the
// count is the process's.
func TestMaxActiveFaultsProcessWide(t *testing.T) {
	e := newEnv(t)
	a := startBackend(t, "a")
	delayAll := testutils.MarshalAny(&faultv3.HTTPFault{
		Delay: &faultcommonv3.FaultDelay{
			FaultDelaySecifier: &faultcommonv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(time.Hour)},
			Percentage:         &typev3.FractionalPercent{Numerator: 100},
		},
		MaxActiveFaults: wrapperspb.UInt32(1),
	})
	res := tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a))
	res.Listeners = []*listenerv3.Listener{listenerWithFilters(t, faultFilter("fault", delayAll, false))}
	e.update(res)
	first, second := e.dial(), e.dial()
	ctx, cancel := context.WithCancel(e.ctx)
	delayed := make(chan error, 1)
	go func() {
		_, err := call(ctx, first, grpc.WaitForReady(true))
		delayed <- err
	}()
	waitFor(t, e.ctx, func() bool { return grpcxds.ActiveFaults() == 1 })
	if got, err := call(e.ctx, second, grpc.WaitForReady(true)); err != nil || got != "a" {
		t.Errorf("RPC of a second channel while one fault is active, max_active_faults 1: %q, %v; want served by a", got, err)
	}
	cancel()
	if err := <-delayed; status.Code(err) != codes.Canceled {
		t.Errorf("delayed RPC: %v; want CANCELLED", err)
	}
}
