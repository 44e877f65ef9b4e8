package xdsserver_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// gRFC A92 (draft of 2026-05-26): the authorization service's
// response_headers_to_add are ignored when the RPC ends Trailers-Only;
// they join the handler's response headers whenever there are any.

// respDesc's handlers answer as their request says: "fail" fails with no
// message and no headers (Trailers-Only), "set-fail" sets a header and
// fails, "send" sends its own headers then a message, anything else
// answers with one message.
var respDesc = grpc.ServiceDesc{
	ServiceName: "goxds.test.Resp",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Unary", Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) {
			switch req.(*wrapperspb.StringValue).GetValue() {
			case "fail":
				return nil, status.Error(codes.FailedPrecondition, "handler failed")
			case "set-fail":
				_ = grpc.SetHeader(ctx, metadata.Pairs("x-h", "h"))
				return nil, status.Error(codes.FailedPrecondition, "handler failed")
			case "send":
				if err := grpc.SendHeader(ctx, metadata.Pairs("x-h", "h")); err != nil {
					return nil, err
				}
			}
			return wrapperspb.String("ok"), nil
		}
		if icpt == nil {
			return h(ctx, in)
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/goxds.test.Resp/Unary"}, h)
	}}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Stream",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			in := new(wrapperspb.StringValue)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			switch in.GetValue() {
			case "fail":
				return status.Error(codes.FailedPrecondition, "handler failed")
			case "set-fail":
				_ = ss.SetHeader(metadata.Pairs("x-h", "h"))
				return status.Error(codes.FailedPrecondition, "handler failed")
			case "send":
				if err := ss.SendHeader(metadata.Pairs("x-h", "h")); err != nil {
					return err
				}
			}
			return ss.SendMsg(wrapperspb.String("ok"))
		},
	}},
}

// respCase is what a handler asked to do answers, as the client sees it.
type respCase struct {
	do       string
	code     codes.Code
	headers  string // x-h and x-resp of the response headers, "x-h=...;x-resp=..."
	trailers string // the same of the trailers
}

var respCases = []respCase{
	{do: "fail", code: codes.FailedPrecondition, headers: "x-h=;x-resp=", trailers: "x-h=;x-resp="},
	{do: "set-fail", code: codes.FailedPrecondition, headers: "x-h=h;x-resp=r", trailers: "x-h=;x-resp="},
	{do: "send", code: codes.OK, headers: "x-h=h;x-resp=r", trailers: "x-h=;x-resp="},
	{do: "message", code: codes.OK, headers: "x-h=;x-resp=r", trailers: "x-h=;x-resp="},
}

func respSummary(md metadata.MD) string {
	return "x-h=" + strings.Join(md.Get("x-h"), ",") + ";x-resp=" + strings.Join(md.Get("x-resp"), ",")
}

// An allowed RPC whose handler fails with neither a message nor headers
// ends Trailers-Only: the service's response header (x-resp) is sent
// neither as a header nor as a trailer. Where the handler sends a message
// or headers of its own, x-resp joins them; unary and streaming alike.
func TestExtAuthzResponseHeadersTrailersOnly(t *testing.T) {
	a := startAuthz(t)
	// respDesc is registered before the Listener comes: a server version
	// started before RegisterService would not serve it.
	e := newEnvWith(t, testutils.ManagementServerOptions{}, testutils.AllowGRPCService(a.Target()))
	e.srv.RegisterService(&respDesc, struct{}{})
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{
		e.serverListener(nil, authzRoutes(), testutils.ExtAuthzFilter(a.Target(), nil))}})
	e.waitMode(xdsserver.ServingModeServing)
	conn := e.dial()
	for _, c := range respCases {
		var hdr, tr metadata.MD
		err := conn.Invoke(e.ctx, "/goxds.test.Resp/Unary", wrapperspb.String(c.do), new(wrapperspb.StringValue), grpc.Header(&hdr), grpc.Trailer(&tr))
		if status.Code(err) != c.code || respSummary(hdr) != c.headers || respSummary(tr) != c.trailers {
			t.Errorf("unary %s: %v, headers %s, trailers %s; want code %v, headers %s, trailers %s",
				c.do, err, respSummary(hdr), respSummary(tr), c.code, c.headers, c.trailers)
		}

		st, err := conn.NewStream(e.ctx, &respDesc.Streams[0], "/goxds.test.Resp/Stream")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(wrapperspb.String(c.do)); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		err = st.RecvMsg(new(wrapperspb.StringValue))
		if err == nil {
			if err = st.RecvMsg(new(wrapperspb.StringValue)); errors.Is(err, io.EOF) {
				err = nil
			}
		}
		hdr, _ = st.Header()
		if status.Code(err) != c.code || respSummary(hdr) != c.headers || respSummary(st.Trailer()) != c.trailers {
			t.Errorf("stream %s: %v, headers %s, trailers %s; want code %v, headers %s, trailers %s",
				c.do, err, respSummary(hdr), respSummary(st.Trailer()), c.code, c.headers, c.trailers)
		}
	}
}

// With an external processing filter in the chain, the service's response
// headers are added where the filter stands on the response's way back:
// after the processor has seen the handler's headers when the
// authorization filter comes first, before when it comes second; and in
// neither order to a Trailers-Only response, whose end_of_stream headers
// the processor sees without them.
func TestExtAuthzResponseHeadersWithExtProc(t *testing.T) {
	type seen struct {
		resp string // x-resp of the response headers the processor saw
		eos  bool
	}
	saw := make(chan seen, 16)
	p, err := testutils.StartProcServer(testutils.ProcessEach(func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		switch {
		case r.GetRequestHeaders() != nil:
			return []*procv3.ProcessingResponse{testutils.ProcRequestHeaders(nil)}, nil
		case r.GetResponseHeaders() != nil:
			saw <- seen{testutils.ProcHeaderValue(r.GetResponseHeaders().GetHeaders(), "x-resp"), r.GetResponseHeaders().GetEndOfStream()}
			return []*procv3.ProcessingResponse{testutils.ProcResponseHeaders(nil)}, nil
		}
		return nil, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	a := startAuthz(t)
	allowBoth := func(c *bootstrap.Config) {
		testutils.AllowGRPCService(a.Target())(c)
		c.AllowedGRPCServices[p.Target()] = c.AllowedGRPCServices[a.Target()]
	}
	for _, authzFirst := range []bool{true, false} {
		authz, proc := testutils.ExtAuthzFilter(a.Target(), nil), testutils.ExtProcFilter(p.Target(), nil)
		chain := []*hcmv3.HttpFilter{authz, proc}
		if !authzFirst {
			chain = []*hcmv3.HttpFilter{proc, authz}
		}
		e := newEnvWith(t, testutils.ManagementServerOptions{}, allowBoth)
		e.srv.RegisterService(&respDesc, struct{}{})
		e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, authzRoutes(), chain...)}})
		e.waitMode(xdsserver.ServingModeServing)
		conn := e.dial()
		for _, do := range []string{"message", "fail"} {
			wantSeen := seen{resp: "", eos: do == "fail"}
			if !authzFirst && do == "message" {
				wantSeen.resp = "r"
			}
			wantHeaders := "x-h=;x-resp="
			if do == "message" {
				wantHeaders = "x-h=;x-resp=r"
			}
			var hdr, tr metadata.MD
			err := conn.Invoke(e.ctx, "/goxds.test.Resp/Unary", wrapperspb.String(do), new(wrapperspb.StringValue), grpc.Header(&hdr), grpc.Trailer(&tr))
			if (err != nil) != (do == "fail") || respSummary(hdr) != wantHeaders || len(tr.Get("x-resp")) != 0 {
				t.Errorf("authorization first %v, unary %s: %v, headers %s, trailers %s; want headers %s", authzFirst, do, err, respSummary(hdr), respSummary(tr), wantHeaders)
			}
			select {
			case got := <-saw:
				if got != wantSeen {
					t.Errorf("authorization first %v, unary %s: the processor saw response headers %+v, want %+v", authzFirst, do, got, wantSeen)
				}
			case <-e.ctx.Done():
				t.Fatalf("authorization first %v, unary %s: the processor saw no response headers", authzFirst, do)
			}

			st, err := conn.NewStream(e.ctx, &respDesc.Streams[0], "/goxds.test.Resp/Stream")
			if err != nil {
				t.Fatal(err)
			}
			if err := st.SendMsg(wrapperspb.String(do)); err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			err = st.RecvMsg(new(wrapperspb.StringValue))
			hdr, _ = st.Header()
			if (err != nil) != (do == "fail") || respSummary(hdr) != wantHeaders {
				t.Errorf("authorization first %v, stream %s: %v, headers %s; want headers %s", authzFirst, do, err, respSummary(hdr), wantHeaders)
			}
			select {
			case got := <-saw:
				if got != wantSeen {
					t.Errorf("authorization first %v, stream %s: the processor saw response headers %+v, want %+v", authzFirst, do, got, wantSeen)
				}
			case <-e.ctx.Done():
				t.Fatalf("authorization first %v, stream %s: the processor saw no response headers", authzFirst, do)
			}
			if err == nil {
				_ = st.CloseSend()
				if err := st.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
					t.Errorf("authorization first %v, stream %s: end %v", authzFirst, do, err)
				}
			}
		}
	}
}

// An RPC that the authorization service allows with response headers and
// a later filter (RBAC) denies ends Trailers-Only, without them.
func TestExtAuthzResponseHeadersLaterFilterDenies(t *testing.T) {
	a := startAuthz(t)
	denyAll := rbacWith(&rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{
		Action: rbacv3.RBAC_DENY,
		Policies: map[string]*rbacv3.Policy{"all": {
			Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_Any{Any: true}}},
			Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
		}},
	}})
	e := newEnvWith(t, testutils.ManagementServerOptions{}, testutils.AllowGRPCService(a.Target()))
	e.srv.RegisterService(&respDesc, struct{}{})
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{
		e.serverListener(nil, authzRoutes(), testutils.ExtAuthzFilter(a.Target(), nil), denyAll)}})
	e.waitMode(xdsserver.ServingModeServing)
	var hdr, tr metadata.MD
	err := e.dial().Invoke(e.ctx, "/goxds.test.Resp/Unary", wrapperspb.String("message"), new(wrapperspb.StringValue), grpc.Header(&hdr), grpc.Trailer(&tr))
	if status.Code(err) != codes.PermissionDenied || respSummary(hdr) != "x-h=;x-resp=" || respSummary(tr) != "x-h=;x-resp=" {
		t.Fatalf("%v, headers %s, trailers %s; want PERMISSION_DENIED (RBAC) and no x-resp", err, respSummary(hdr), respSummary(tr))
	}
	if n := len(a.Checks()); n != 1 {
		t.Fatalf("%d checks, want 1 (the service allowed the RPC)", n)
	}
}
