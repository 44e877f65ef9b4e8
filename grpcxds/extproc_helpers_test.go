package grpcxds_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// The helpers of extproc_e2e_test.go: an echoing backend, a scripted
// processor, and the answers it gives.

const (
	procEcho   = "/goxds.test.ProcEcho/Echo"
	procStream = "/goxds.test.ProcEcho/Stream"
)

// procEchoDesc is a service whose Echo answers "echo:" + the request and
// the x-proc headers it got ("|"-joined after a "/"), with header
// x-srv-h: 1 and trailer x-srv-t: 1; a request "fail" fails with
// FAILED_PRECONDITION in a Trailers-Only response, the first request starting "flaky" to a server with
// UNAVAILABLE. Stream answers each message the same way.
var procEchoDesc = grpc.ServiceDesc{
	ServiceName: "goxds.test.ProcEcho",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			if strings.HasPrefix(in.GetValue(), "flaky") && srv.(*echoState).flaky.Add(1) == 1 {
				return nil, status.Error(codes.Unavailable, "flaky at first")
			}
			if in.GetValue() == "fail" {
				// No header set: a Trailers-Only response.
				return nil, status.Error(codes.FailedPrecondition, "asked to fail")
			}
			_ = grpc.SetHeader(ctx, metadata.Pairs("x-srv-h", "1"))
			_ = grpc.SetTrailer(ctx, metadata.Pairs("x-srv-t", "1"))
			return echoOf(ctx, in.GetValue()), nil
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName: "Stream", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, s grpc.ServerStream) error {
			for n := 0; ; n++ {
				in := new(wrapperspb.StringValue)
				err := s.RecvMsg(in)
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if n == 0 && strings.HasPrefix(in.GetValue(), "fail") {
					return status.Error(codes.FailedPrecondition, "asked to fail") // Trailers-Only
				}
				if n == 0 {
					_ = s.SetHeader(metadata.Pairs("x-srv-h", "1"))
					s.SetTrailer(metadata.Pairs("x-srv-t", "1"))
				}
				if err := s.SendMsg(echoOf(s.Context(), in.GetValue())); err != nil {
					return err
				}
			}
		},
	}},
}

// echoState is a procEchoDesc server's: the "flaky" requests it got.
type echoState struct{ flaky atomic.Int32 }

func echoOf(ctx context.Context, v string) *wrapperspb.StringValue {
	md, _ := metadata.FromIncomingContext(ctx)
	return wrapperspb.String("echo:" + v + "/" + strings.Join(md.Get("x-proc"), "|"))
}

// startEcho starts a procEchoDesc server with opts, as a backend of eds.
func startEcho(t *testing.T, opts ...grpc.ServerOption) *backend {
	b, _ := startEchoState(t, opts...)
	return b
}

// startEchoState is startEcho, with the server's state.
func startEchoState(t *testing.T, opts ...grpc.ServerOption) (*backend, *echoState) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	st := new(echoState)
	srv.RegisterService(&procEchoDesc, st)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return &backend{name: "echo", addr: lis.Addr().String(), port: uint32(lis.Addr().(*net.TCPAddr).Port)}, st
}

// procEnv is a channel's environment whose listener has filters, every
// RPC routed to an echo backend; RPCs with header x-route: open take a
// route whose typed_per_filter_config for "proc" is open (when not nil).
func procEnv(t *testing.T, target string, open *anypb.Any, filters ...*hcmv3.HttpFilter) *env {
	t.Helper()
	return procEnvOn(t, startEcho(t), target, open, filters...)
}

// procEnvOn is procEnv with the backend b.
func procEnvOn(t *testing.T, b *backend, target string, open *anypb.Any, filters ...*hcmv3.HttpFilter) *env {
	t.Helper()
	e := authzEnv(t, testutils.AllowGRPCService(target))
	rs := []*routev3.Route{toCluster(prefix("/"), "A")}
	if open != nil {
		r := toCluster(prefix("/"), "A")
		r.Match.Headers = []*routev3.HeaderMatcher{{Name: "x-route", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "open"}}}
		r.TypedPerFilterConfig = map[string]*anypb.Any{"proc": open}
		rs = append([]*routev3.Route{r}, rs...)
	}
	res := tree(routes(rs...), clusters("A"), eds("A", b))
	res.Listeners = []*listenerv3.Listener{listenerWithFilters(t, filters...)}
	e.update(res)
	return e
}

// echo makes one Echo RPC of v.
func echo(ctx context.Context, conn *grpc.ClientConn, v string, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, procEcho, wrapperspb.String(v), out, append(opts, grpc.WaitForReady(true))...)
	return out.GetValue(), err
}

// compressions is a server stats handler that records the compression of
// each RPC's request (its grpc-encoding).
type compressions struct{ got chan string }

func (c *compressions) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (c *compressions) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok {
		c.got <- h.Compression
	}
}
func (c *compressions) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (c *compressions) HandleConn(context.Context, stats.ConnStats) {}

// marking is testutils.ProcMarking's processor (messages marked, in GRPC
// body mode), adding x-proc: in to the client's headers, x-proc-h: 1 to
// the server's and x-proc-t: 1 to its trailers.
var marking = testutils.ProcMarking(testutils.ProcSetHeaders("x-proc", "in"), testutils.ProcSetHeaders("x-proc-h", "1"), testutils.ProcSetHeaders("x-proc-t", "1"))
