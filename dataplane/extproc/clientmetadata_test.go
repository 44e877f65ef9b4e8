package extproc

import (
	"errors"
	"testing"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// ClientMetadata sends a gRPC request's metadata with :path and :method,
// which both sides' bindings add, and gives back the processor's answer
// without them; the caller's metadata is left as it was.
func TestClientMetadata(t *testing.T) {
	c, fc := newTest(t, config(resources.ExtProcModes{RequestHeaders: true}))
	md := map[string][]string{"x-a": {"1"}}
	res := async(func() (map[string][]string, error) { return c.ClientMetadata("/S/M", md) })
	s := stream(t, fc)
	r := recvSent(t, s)
	if r.Kind != RequestHeaders || len(r.Headers[":path"]) != 1 || r.Headers[":path"][0] != "/S/M" ||
		len(r.Headers[":method"]) != 1 || r.Headers[":method"][0] != "POST" || r.Headers["x-a"] == nil {
		t.Fatalf("sent %+v, want the metadata with :path /S/M and :method POST", r)
	}
	s.answers <- answer{resp: &Response{Kind: RequestHeaders, SetHeaders: []extauthz.HeaderOption{{Key: "x-b", Value: "2"}}}}
	h, err := await(t, res)
	if err != nil {
		t.Fatal(err)
	}
	if h[":path"] != nil || h[":method"] != nil || h["x-a"][0] != "1" || h["x-b"][0] != "2" || len(h) != 2 {
		t.Fatalf("ClientMetadata = %v, want x-a and x-b, no pseudo-headers", h)
	}
	if len(md) != 1 {
		t.Fatalf("the caller's metadata became %v", md)
	}
}

// FailingClient's streams fail to open with its error, as a processor no
// channel reaches: the call fails as for a stream that did not open.
func TestFailingClient(t *testing.T) {
	errNo := errors.New("no channel")
	if _, err := FailingClient(errNo).Open(t.Context()); !errors.Is(err, errNo) {
		t.Fatalf("Open: %v, want %v", err, errNo)
	}
}
