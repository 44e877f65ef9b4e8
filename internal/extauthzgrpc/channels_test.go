package extauthzgrpc_test

import (
	"context"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

func insecureService(target string) *resources.GrpcService {
	return &resources.GrpcService{TargetURI: target, Trusted: true, ChannelCredentials: resources.GrpcChannelInsecure}
}

// hold is a check the HeldAuthz service holds until its Release closes.
func hold(ctx context.Context, c extauthz.Client) error {
	_, err := c.Check(ctx, &extauthz.CheckRequest{Headers: []extauthz.HeaderValue{{Key: "x-want", Value: "hold"}}})
	return err
}

// A check that took its client under a configuration the owner has since
// replaced, whose channel the update closed, still reaches its service,
// on a channel that closes when the check ends. A service named again
// while a check holds its retired channel keeps that channel.
func TestChannelsLookupAfterRetire(t *testing.T) {
	a, b := testutils.StartHeldAuthz(t), testutils.StartHeldAuthz(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	chans := &extauthzgrpc.Channels{}
	defer chans.Close()
	gsA, gsB := insecureService(a.Target()), insecureService(b.Target())
	chans.Name("cfg", []*resources.GrpcService{gsA})
	ca, err := chans.Client(gsA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Check(ctx, &extauthz.CheckRequest{}); err != nil {
		t.Fatal(err)
	}

	// The update retires a's channel, idle: it closes now.
	chans.Name("cfg", []*resources.GrpcService{gsB})
	if err := a.Conns.WaitEnded(ctx, 1); err != nil {
		t.Fatalf("a's idle channel after the update that dropped it: %v", err)
	}
	// A check on the client taken before reaches a on a channel of its
	// own, closed once the check is over.
	if _, err := ca.Check(ctx, &extauthz.CheckRequest{}); err != nil {
		t.Fatalf("check under the replaced configuration: %v", err)
	}
	if err := a.Conns.WaitEnded(ctx, 2); err != nil {
		t.Fatalf("the channel of a late check was not closed after it: %v", err)
	}

	// b's channel, retired while a check holds it, then named again: kept.
	cb, err := chans.Client(gsB)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() { held <- hold(ctx, cb) }()
	<-b.Entered
	chans.Name("cfg", []*resources.GrpcService{gsA})
	chans.Name("cfg", []*resources.GrpcService{gsA, gsB})
	close(b.Release)
	if err := <-held; err != nil {
		t.Fatalf("held check: %v", err)
	}
	if _, err := cb.Check(ctx, &extauthz.CheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if begun, ended := b.Conns.Counts(); begun != 1 || ended != 0 {
		t.Errorf("b: %d connections begun, %d ended; want its one channel kept", begun, ended)
	}
}

// A processing stream counts as a call in flight for as long as it is
// open: a channel the update retired closes when the stream ends, not
// before. Names of several scopes (a server's listeners) add up.
func TestChannelsStreamInFlight(t *testing.T) {
	a := testutils.StartHeldAuthz(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	chans := &extauthzgrpc.Channels{}
	defer chans.Close()
	gsA := insecureService(a.Target())
	chans.Name("one", []*resources.GrpcService{gsA})
	chans.Name("two", []*resources.GrpcService{gsA})
	conn, _, err := chans.Conn(gsA)
	if err != nil {
		t.Fatal(err)
	}
	// A stream to Check as a client stream: the service waits for its
	// request, so the stream is open at both ends until it is sent.
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/envoy.service.auth.v3.Authorization/Check")
	if err != nil {
		t.Fatal(err)
	}
	chans.Name("one", nil)
	chans.Name("two", nil) // no scope names a now: it closes when the stream ends
	// The service's answer, not the channel's closing under the stream.
	if err := s.SendMsg(&authv3.CheckRequest{}); err != nil {
		t.Fatalf("stream open across the update: send: %v", err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := s.RecvMsg(new(authv3.CheckResponse)); err != nil {
		t.Fatalf("stream open across the update: %v, want the service's answer", err)
	}
	if err := a.Conns.WaitEnded(ctx, 1); err != nil {
		t.Fatalf("a's channel after its last stream ended: %v", err)
	}
}
