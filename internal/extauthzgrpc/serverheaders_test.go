package extauthzgrpc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/internal/extauthzgrpc"
)

// blockingStream is a ServerTransportStream whose SendHeader waits until
// released, as ext_proc's does while its processor answers.
type blockingStream struct {
	sending chan struct{} // closed when SendHeader is entered
	release chan struct{}
	setHdr  chan metadata.MD
}

func (s *blockingStream) Method() string { return "/svc/M" }
func (s *blockingStream) SendHeader(metadata.MD) error {
	close(s.sending)
	<-s.release
	return nil
}
func (s *blockingStream) SetHeader(md metadata.MD) error { s.setHdr <- md; return nil }
func (s *blockingStream) SetTrailer(metadata.MD) error   { return nil }

// The stream below ServerHeaders is not called under its lock: while a
// SendHeader waits in it (for a processor, say), a SetHeader from another
// goroutine reaches the stream rather than wait for the first call to end.
func TestServerHeadersCallNoStreamUnderLock(t *testing.T) {
	real := &blockingStream{sending: make(chan struct{}), release: make(chan struct{}), setHdr: make(chan metadata.MD, 1)}
	defer close(real.release)
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), real)
	d := extauthz.Decision{Allow: true, ResponseHeaders: []extauthz.Mutation{{Key: "x-authz", Value: "yes"}}}
	ctx, h, err := extauthzgrpc.ServerDecision(ctx, d, nil, "")
	if err != nil || h == nil {
		t.Fatalf("ServerDecision: headers %v, error %v; want a holder and no error", h, err)
	}
	go grpc.SendHeader(ctx, metadata.Pairs("x-own", "1"))
	select {
	case <-real.sending:
	case <-time.After(10 * time.Second):
		t.Fatal("SendHeader did not reach the stream")
	}
	go grpc.SetHeader(ctx, metadata.Pairs("x-late", "2"))
	select {
	case md := <-real.setHdr:
		if got := md.Get("x-late"); len(got) != 1 || got[0] != "2" {
			t.Fatalf("the stream was set %v, want x-late: 2", md)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a SetHeader while SendHeader waits in the stream below did not reach it: the stream is called under ServerHeaders' lock")
	}
}
