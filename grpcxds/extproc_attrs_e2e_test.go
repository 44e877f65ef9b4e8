package grpcxds_test

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/goxds/xds/testutils"
)

// The request_attributes a client knows before the RPC is sent (gRFC
// A93, of gRFC A106's names) reach the processor with the client's
// headers: the path, the authority (a grpc.CallAuthority's, else the
// target's endpoint), the headers (a -bin header's values
// base64-encoded), those a header names, and the empty query.
func TestExtProcClientRequestAttributes(t *testing.T) {
	got := make(chan *structpb.Struct, 4)
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetRequestHeaders() != nil {
			got <- r.GetAttributes()["envoy.filters.http.ext_proc"]
		}
		return marking(r)
	})
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.RequestAttributes = []string{"request.path", "request.url_path", "request.host", "request.method", "request.headers",
			"request.referer", "request.useragent", "request.id", "request.query", "request.protocol"}
	}))
	conn := e.dial()
	ctx := metadata.AppendToOutgoingContext(e.ctx, "x-request-id", "r1", "referer", "http://ref", "x-b-bin", "\x00\x01", "x-app", "a")
	for _, call := range []struct {
		opts []grpc.CallOption
		host string
	}{{nil, listener}, {[]grpc.CallOption{grpc.CallAuthority("other.example")}, "other.example"}} {
		if _, err := echo(ctx, conn, "hi", call.opts...); err != nil {
			t.Fatal(err)
		}
		a := (<-got).AsMap()
		want := map[string]any{"request.path": procEcho, "request.url_path": procEcho, "request.host": call.host, "request.method": "POST",
			"request.referer": "http://ref", "request.id": "r1", "request.query": "", "request.protocol": "HTTP/2"}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("attribute %s = %v, want %v (all: %v)", k, a[k], v, a)
			}
		}
		h, _ := a["request.headers"].(map[string]any)
		if h["x-app"] != "a" || h["x-b-bin"] != "AAE=" || h["x-request-id"] != "r1" {
			t.Errorf("request.headers = %v, want x-app: a, x-b-bin: AAE=, x-request-id: r1", h)
		}
	}
}
