package xdsserver_test

import (
	"testing"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/testutils"
)

// A Trailers-Only response (RBAC, after the filter, denies the RPC) is
// told to the processor as it is on the wire, and as a client's filter
// tells it: headers with end_of_stream holding the trailers and the
// status (grpc-status 7); the processor's change to them reaches the
// client among the trailers.
func TestExtProcTrailersOnlyCarriesStatus(t *testing.T) {
	seen := make(chan *procv3.HttpHeaders, 4)
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		switch {
		case r.GetRequestHeaders() != nil:
			return []*procv3.ProcessingResponse{testutils.ProcRequestHeaders(nil)}, nil
		case r.GetResponseHeaders() != nil:
			seen <- r.GetResponseHeaders()
			return []*procv3.ProcessingResponse{testutils.ProcResponseHeaders(testutils.ProcSetHeaders("x-proc", "yes"))}, nil
		}
		return nil, nil
	})
	denyAll := rbacWith(&rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: map[string]*rbacv3.Policy{"all": {
		Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_Any{Any: true}}},
		Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
	}}}})
	e := procEnvChain(t, p.Target(), procRoutes(nil), testutils.ExtProcFilter(p.Target(), nil), denyAll)

	var hdr, trl metadata.MD
	err := call(e.ctx, e.dial(), sayHello, grpc.Header(&hdr), grpc.Trailer(&trl))
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("SayHello: %v, want PERMISSION_DENIED", err)
	}
	var h *procv3.HttpHeaders
	select {
	case h = <-seen:
	case <-e.ctx.Done():
		t.Fatal("no response headers event")
	}
	if !h.GetEndOfStream() || testutils.ProcHeaderValue(h.GetHeaders(), "grpc-status") != "7" {
		t.Errorf("the processor saw response headers %v (end_of_stream %v), want end_of_stream with grpc-status 7", h.GetHeaders(), h.GetEndOfStream())
	}
	if got := trl.Get("x-proc"); len(got) != 1 || got[0] != "yes" || hdr.Get("x-proc") != nil {
		t.Errorf("the client got headers %v, trailers %v; want the processor's x-proc among the trailers", hdr, trl)
	}
}
