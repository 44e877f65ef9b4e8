package xdsserver_test

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/goxds/xds/testutils"
)

// The request_attributes of gRFC A106's names that a server knows from
// the RPC reach the processor with its headers: request.headers (the
// metadata without pseudo-headers, a -bin header base64-encoded) and the
// empty request.query too, as on a client.
func TestExtProcRequestAttributes(t *testing.T) {
	got := make(chan *structpb.Struct, 1)
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetRequestHeaders() != nil {
			got <- r.GetAttributes()["envoy.filters.http.ext_proc"]
		}
		return marking(r)
	})
	e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.RequestAttributes = []string{"request.path", "request.headers", "request.query", "request.id", "request.host"}
	}), procRoutes(nil))
	ctx := metadata.AppendToOutgoingContext(e.ctx, "x-request-id", "r1", "x-b-bin", "\x00\x01")
	if err := call(ctx, e.dial(), sayHello); err != nil {
		t.Fatal(err)
	}
	a := (<-got).AsMap()
	if a["request.path"] != sayHello || a["request.query"] != "" || a["request.id"] != "r1" || a["request.host"] != e.lis.Addr().String() {
		t.Errorf("attributes %v, want request.path %s, request.query empty, request.id r1, request.host %s", a, sayHello, e.lis.Addr())
	}
	h, _ := a["request.headers"].(map[string]any)
	if h["x-request-id"] != "r1" || h["x-b-bin"] != "AAE=" || h[":authority"] != nil {
		t.Errorf("request.headers = %v, want x-request-id: r1, x-b-bin: AAE=, no pseudo-header", h)
	}
}
