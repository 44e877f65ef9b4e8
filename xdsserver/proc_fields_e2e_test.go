package xdsserver_test

import (
	"slices"
	"strings"
	"testing"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// gRFC A93's configuration fields on an xDS-enabled server, configured by
// go-control-plane's server (the client side's are in grpcxds/parity's
// TestParityExtProc): forward_rules (the processor is sent the client's
// headers allowed_headers matches and disallowed_headers does not);
// mutation_rules (a change they disallow is ignored, or fails the RPC
// with INTERNAL, as a failed stream does, under disallow_is_error);
// disable_immediate_response (an immediate response is a failed stream:
// INTERNAL, not the processor's status, and with failure_mode_allow the
// RPC goes on).
func TestExtProcServerConfigFields(t *testing.T) {
	t.Run("forward_rules", func(t *testing.T) {
		seen := make(chan []string, 1)
		p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
			if h := r.GetRequestHeaders(); h != nil {
				var keys []string
				for _, v := range h.GetHeaders().GetHeaders() {
					keys = append(keys, v.GetKey())
				}
				select {
				case seen <- keys:
				default:
				}
				return []*procv3.ProcessingResponse{testutils.ProcRequestHeaders(nil)}, nil
			}
			return []*procv3.ProcessingResponse{testutils.ProcResponseHeaders(nil)}, nil
		})
		e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
			m.ForwardRules = &extprocv3.HeaderForwardingRules{
				AllowedHeaders:    &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "x-"}}}},
				DisallowedHeaders: &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x-secret"}}}},
			}
		}), procRoutes(nil))
		ctx := metadata.AppendToOutgoingContext(e.ctx, "x-a", "1", "x-secret", "s", "other", "o")
		if _, err := echo(ctx, e.dial(), "x-a"); err != nil {
			t.Fatal(err)
		}
		keys := <-seen
		if !slices.Contains(keys, "x-a") || slices.Contains(keys, "x-secret") || slices.Contains(keys, "other") {
			t.Fatalf("the processor was sent headers %q, want x-a and neither x-secret nor other", keys)
		}
	})

	setsProc := func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetRequestHeaders() != nil {
			return []*procv3.ProcessingResponse{testutils.ProcRequestHeaders(testutils.ProcSetHeaders("x-proc", "yes"))}, nil
		}
		return []*procv3.ProcessingResponse{testutils.ProcResponseHeaders(nil)}, nil
	}
	for _, isError := range []bool{false, true} {
		t.Run(map[bool]string{false: "mutation_rules, ignored", true: "mutation_rules, disallow_is_error"}[isError], func(t *testing.T) {
			p, _ := testutils.StartProcCounting(t, setsProc)
			e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
				m.MutationRules = &mutationv3.HeaderMutationRules{
					DisallowExpression: &matcherv3.RegexMatcher{Regex: "x-proc"},
					DisallowIsError:    wrapperspb.Bool(isError),
				}
			}), procRoutes(nil))
			got, err := echo(e.ctx, e.dial(), "x-proc")
			if !isError {
				if err != nil || got != "" {
					t.Fatalf("the handler saw x-proc %q (err %v), want the disallowed change ignored", got, err)
				}
				return
			}
			if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), `"x-proc"`) {
				t.Fatalf("%v, want INTERNAL naming x-proc", err)
			}
		})
	}

	immediate := func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetRequestHeaders() != nil {
			return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
				GrpcStatus: &procv3.GrpcStatus{Status: uint32(codes.PermissionDenied)}, Details: "go away"}}}}, nil
		}
		return []*procv3.ProcessingResponse{testutils.ProcResponseHeaders(nil)}, nil
	}
	for _, allow := range []bool{false, true} {
		t.Run(map[bool]string{false: "disable_immediate_response", true: "disable_immediate_response, failure_mode_allow"}[allow], func(t *testing.T) {
			p, _ := testutils.StartProcCounting(t, immediate)
			e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
				m.DisableImmediateResponse, m.FailureModeAllow = true, allow
			}), procRoutes(nil))
			_, err := echo(e.ctx, e.dial(), "x-a")
			switch {
			case allow && err != nil:
				t.Fatalf("%v, want the RPC let through by failure_mode_allow", err)
			case !allow && (status.Code(err) != codes.Internal || strings.Contains(status.Convert(err).Message(), "go away")):
				t.Fatalf("%v, want INTERNAL (a failed stream), not the immediate response", err)
			}
		})
	}
}
