package testutils

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func startFakeServer(t *testing.T, opts FakeServerOptions) *FakeServer {
	t.Helper()
	fs, err := StartFakeServer(opts)
	if err != nil {
		t.Fatalf("StartFakeServer: %v", err)
	}
	t.Cleanup(fs.Stop)
	return fs
}

func TestFakeServerSotWExchange(t *testing.T) {
	ctx := testContext(t)
	fs := startFakeServer(t, FakeServerOptions{})
	start := time.Now()
	c := openSotW(ctx, t, adsClient(t, fs.Address()))

	c.send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ClusterType, ResourceNames: []string{"a"}})
	req, err := fs.NextRequest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if req.GetNode().GetId() != "n1" || !slices.Equal(req.GetResourceNames(), []string{"a"}) {
		t.Fatalf("first request %v, want node n1 asking for [a]", req)
	}
	want := SotWResponse(resourcev3.ClusterType, "v1", "nonce-1", Cluster("a", ""))
	if err := fs.Send(want); err != nil {
		t.Fatal(err)
	}
	if got := c.recv(); !proto.Equal(got, want) {
		t.Fatalf("client got %v, want %v", got, want)
	}
	c.ack(want, "a")
	ack, err := fs.NextRequest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ack.GetResponseNonce() != "nonce-1" || ack.GetVersionInfo() != "v1" {
		t.Fatalf("ACK %v, want nonce-1 at v1", ack)
	}

	reqs := fs.Requests()
	if len(reqs) != 2 || reqs[0].StreamID != 1 || reqs[1].SotW != ack || reqs[0].Delta != nil {
		t.Fatalf("Requests() = %v, want the two requests of stream 1", reqs)
	}
	if reqs[0].Received.Before(start) || reqs[1].Received.Before(reqs[0].Received) {
		t.Errorf("receive times %v, %v out of order (test began %v)", reqs[0].Received, reqs[1].Received, start)
	}
	st, err := fs.NextStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != 1 || st.Delta || st.Opened.Before(start) || fs.StreamCount() != 1 {
		t.Fatalf("stream %d (delta %t, opened %v, count %d), want SotW stream 1 opened after %v", st.ID, st.Delta, st.Opened, fs.StreamCount(), start)
	}
	// The stream's own cursor starts at its first request.
	if r, err := st.NextRequest(ctx); err != nil || r != reqs[0].SotW {
		t.Fatalf("stream.NextRequest = %v, %v; want the first request", r, err)
	}
	if _, err := st.NextDeltaRequest(ctx); err == nil {
		t.Error("NextDeltaRequest on a SotW stream succeeded, want an error")
	}
	if err := fs.SendDelta(&discoveryv3.DeltaDiscoveryResponse{}); err == nil {
		t.Error("SendDelta on a SotW stream succeeded, want an error")
	}
}

func TestFakeServerDeltaExchange(t *testing.T) {
	ctx := testContext(t)
	fs := startFakeServer(t, FakeServerOptions{})
	c := openDelta(ctx, t, adsClient(t, fs.Address()))

	c.send(&discoveryv3.DeltaDiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ClusterType, ResourceNamesSubscribe: []string{"a", "b"}})
	req, err := fs.NextDeltaRequest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(req.GetResourceNamesSubscribe(), []string{"a", "b"}) {
		t.Fatalf("request %v, want a subscription to [a b]", req)
	}
	want := DeltaResponse(resourcev3.ClusterType, "n-1", []string{"b"},
		WrapResource("a", "1", time.Minute, Cluster("a", "")))
	if err := fs.SendDelta(want); err != nil {
		t.Fatal(err)
	}
	if got := c.recv(); !proto.Equal(got, want) {
		t.Fatalf("client got %v, want %v", got, want)
	}
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: "n-1"})
	if ack, err := fs.NextDeltaRequest(ctx); err != nil || ack.GetResponseNonce() != "n-1" {
		t.Fatalf("ACK %v, %v; want nonce n-1", ack, err)
	}
	if err := fs.Send(&discoveryv3.DiscoveryResponse{}); err == nil {
		t.Error("Send on a delta stream succeeded, want an error")
	}
}

// Whatever the test builds goes out unchanged, garbage included.
func TestFakeServerSendsMalformedResponses(t *testing.T) {
	ctx := testContext(t)
	fs := startFakeServer(t, FakeServerOptions{})
	c := openSotW(ctx, t, adsClient(t, fs.Address()))
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	if _, err := fs.NextRequest(ctx); err != nil {
		t.Fatal(err)
	}
	bad := []*discoveryv3.DiscoveryResponse{
		{TypeUrl: resourcev3.ClusterType, VersionInfo: "1", Resources: []*anypb.Any{CorruptAny(resourcev3.ClusterType)}, Nonce: "x"},
		SotWResponse(resourcev3.ClusterType, "2", "y", Listener("l", "r")),                      // wrong type inside
		SotWResponse(resourcev3.ListenerType, "3", "", Listener("l", "r")),                      // no nonce
		SotWResponse(resourcev3.ClusterType, "4", "z", Cluster("a", ""), Cluster("a", "")),      // duplicate
		SotWResponse(resourcev3.ClusterType, "5", "w", WrapResource("a", "", time.Second, nil)), // heartbeat
	}
	for _, want := range bad {
		if err := fs.Send(want); err != nil {
			t.Fatal(err)
		}
		if got := c.recv(); !proto.Equal(got, want) {
			t.Fatalf("client got %v, want %v", got, want)
		}
	}
	var m discoveryv3.DiscoveryResponse
	if err := proto.Unmarshal(CorruptAny("x").GetValue(), &m); err == nil {
		t.Error("CorruptAny's bytes decode, want an error")
	}
}

func TestFakeServerStreams(t *testing.T) {
	ctx := testContext(t)
	fs := startFakeServer(t, FakeServerOptions{})
	client := adsClient(t, fs.Address())
	if err := fs.Send(&discoveryv3.DiscoveryResponse{}); err == nil {
		t.Error("Send before any stream succeeded, want an error")
	}

	c1 := openSotW(ctx, t, client)
	c1.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	st1, err := fs.NextStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st1.NextRequest(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fs.CutStream(status.Error(codes.Unavailable, "cut by test")); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.st.Recv(); status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "cut by test" {
		t.Fatalf("client saw %v, want the test's Unavailable", err)
	}
	<-st1.Done()
	if _, err := st1.NextRequest(ctx); !errors.Is(err, ErrStreamEnded) {
		t.Errorf("NextRequest on the cut stream = %v, want ErrStreamEnded", err)
	}
	if err := st1.Send(&discoveryv3.DiscoveryResponse{}); !errors.Is(err, ErrStreamEnded) {
		t.Errorf("Send on the cut stream = %v, want ErrStreamEnded", err)
	}
	st1.Cut(nil) // a no-op now

	c2 := openDelta(ctx, t, client)
	c2.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	st2, err := fs.NextStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st2.ID != 2 || !st2.Delta || fs.StreamCount() != 2 || st2.Opened.Before(st1.Opened) {
		t.Fatalf("second stream %d (delta %t, count %d), want delta stream 2", st2.ID, st2.Delta, fs.StreamCount())
	}
	// The global cursor sees the request of each stream once.
	if r, err := fs.NextRequest(ctx); err != nil || r.GetTypeUrl() != resourcev3.ListenerType {
		t.Fatalf("NextRequest = %v, %v; want stream 1's request", r, err)
	}
	if r, err := fs.NextDeltaRequest(ctx); err != nil || r.GetTypeUrl() != resourcev3.ListenerType {
		t.Fatalf("NextDeltaRequest = %v, %v; want stream 2's request", r, err)
	}
	// A client that hangs up ends the stream too.
	if err := c2.st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-st2.Done():
	case <-ctx.Done():
		t.Fatal("stream 2 did not end after the client closed it")
	}
	if _, err := c2.st.Recv(); err != io.EOF {
		t.Errorf("client saw %v after hanging up, want io.EOF", err)
	}
	if got := fs.Streams(); len(got) != 2 || got[0] != st1 || got[1] != st2 {
		t.Errorf("Streams() = %v, want [st1 st2]", got)
	}
}

func TestFakeServerWaitsHonourContext(t *testing.T) {
	fs := startFakeServer(t, FakeServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := fs.NextRequest(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("NextRequest = %v, want DeadlineExceeded", err)
	}
	if _, err := fs.NextDeltaRequest(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("NextDeltaRequest = %v, want DeadlineExceeded", err)
	}
	if _, err := fs.NextStream(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("NextStream = %v, want DeadlineExceeded", err)
	}
}

func TestFakeServerBlackhole(t *testing.T) {
	ctx := testContext(t)
	fs := startFakeServer(t, FakeServerOptions{})
	fs.SetBlackhole(true)
	cc, err := grpc.NewClient(fs.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := discoveryv3.NewAggregatedDiscoveryServiceClient(cc)

	// The connection is accepted but never answered, so no stream can open;
	// only a deadline ends the attempt.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := client.StreamAggregatedResources(short, grpc.WaitForReady(true)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("opening a stream to a black hole: %v, want DeadlineExceeded", err)
	}
	if n := fs.StreamCount(); n != 0 {
		t.Fatalf("StreamCount() = %d, want 0", n)
	}

	// Turning it off drops the held connection; the channel above would now
	// back off for a second, so a fresh one shows the server answering.
	fs.SetBlackhole(false)
	st, err := adsClient(t, fs.Address()).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType}); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.NextRequest(ctx); err != nil {
		t.Fatalf("after the black hole closed: %v", err)
	}
}

// Stop ends streams and waits, leaves no goroutine behind, and a new server
// can take over the address at once.
func TestFakeServerStopAndRestart(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := testContext(t)
	fs, err := StartFakeServer(FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(fs.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
	c := openSotW(ctx, t, client)
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	if _, err := fs.NextRequest(ctx); err != nil {
		t.Fatal(err)
	}

	waiting := make(chan error)
	go func() {
		_, err := fs.NextDeltaRequest(ctx)
		waiting <- err
	}()
	fs.Stop()
	fs.Stop() // idempotent
	if err := <-waiting; !errors.Is(err, ErrServerStopped) {
		t.Errorf("NextDeltaRequest across Stop = %v, want ErrServerStopped", err)
	}
	if _, err := c.st.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("client saw %v, want Unavailable", err)
	}

	fs2, err := StartFakeServer(FakeServerOptions{Address: fs.Address()})
	if err != nil {
		t.Fatalf("restarting on %s: %v", fs.Address(), err)
	}
	defer fs2.Stop()
	st, err := client.StreamAggregatedResources(ctx, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType}); err != nil {
		t.Fatal(err)
	}
	if s, err := fs2.NextStream(ctx); err != nil || s.ID != 1 {
		t.Fatalf("restarted server's first stream: %v, %v", s, err)
	}
}
