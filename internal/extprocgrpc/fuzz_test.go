package extprocgrpc

import (
	"testing"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/dataplane/extproc"
)

// FuzzResponse converts arbitrary ProcessingResponse bytes, what a
// processor sends: nothing panics, a body comes only with a body answer
// and header changes only with a header or trailer answer.
func FuzzResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		p := new(procv3.ProcessingResponse)
		if proto.Unmarshal(b, p) != nil {
			return
		}
		r := Response(p)
		body := r.Kind == extproc.RequestBody || r.Kind == extproc.ResponseBody
		if r.Body != nil && !body {
			t.Fatalf("body on a %v answer", r.Kind)
		}
		if (r.SetHeaders != nil || r.RemoveHeaders != nil) && (body || r.Kind == 0) {
			t.Fatalf("header changes on a %v answer", r.Kind)
		}
	})
}
