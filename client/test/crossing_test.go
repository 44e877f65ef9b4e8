package test

import (
	"context"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// crossingWire watches the client's side of the gRPC stream: it records the
// Cluster requests sent, and, once armed, holds the next Cluster response
// after it is read off the wire, before the transport sees it, until
// released. The server has then sent the response; what the client sends
// meanwhile crosses it.
type crossingWire struct {
	sent     chan *discoveryv3.DiscoveryRequest
	mu       sync.Mutex
	armed    bool
	arrived  chan string // the held response's nonce
	release  chan struct{}
	released sync.Once
}

func (x *crossingWire) dialOption() grpc.DialOption {
	return grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &crossingStream{ClientStream: cs, x: x}, nil
	})
}

func (x *crossingWire) unblock() { x.released.Do(func() { close(x.release) }) }

type crossingStream struct {
	grpc.ClientStream
	x *crossingWire
}

func (s *crossingStream) SendMsg(m any) error {
	if r, ok := m.(*discoveryv3.DiscoveryRequest); ok && r.GetTypeUrl() == cdsURL {
		s.x.sent <- proto.Clone(r).(*discoveryv3.DiscoveryRequest)
	}
	return s.ClientStream.SendMsg(m)
}

func (s *crossingStream) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	r, ok := m.(*discoveryv3.DiscoveryResponse)
	if !ok || r.GetTypeUrl() != cdsURL {
		return nil
	}
	s.x.mu.Lock()
	hold := s.x.armed
	s.x.armed = false
	s.x.mu.Unlock()
	if hold {
		s.x.arrived <- r.GetNonce()
		<-s.x.release
	}
	return nil
}

// TestE2EPushCrossingUnsubscriptionThenRewatch, against go-control-plane's
// stock server and snapshot cache: the server pushes a new version of C1
// and C2 while the client's request dropping C2 is on its way; that request
// carries the previous nonce, and the server ignores it. While the client
// judges the push it wants C2 again. Its ACK must not name C2: the server,
// which returned C2 in the push and never saw the removal, would take C2 for
// held and never send it again. The ACK names C1 alone (the server sees the
// removal), then the client asks for C1 and C2, and gets C2.
func TestE2EPushCrossingUnsubscriptionThenRewatch(t *testing.T) {
	t.Parallel()
	checkLeaks(t)
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{
		Initial: map[string]testutils.Resources{nodeID: {Clusters: []*clusterv3.Cluster{testutils.Cluster("C1", ""), testutils.Cluster("C2", "")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	b, err := bootstrapFor(ms.Address(), sotw, config{})
	if err != nil {
		t.Fatal(err)
	}
	x := &crossingWire{sent: make(chan *discoveryv3.DiscoveryRequest, 100), arrived: make(chan string, 1), release: make(chan struct{})}
	topts := fastTransport
	topts.DialOptions = append(append([]grpc.DialOption(nil), fastTransport.DialOptions...), x.dialOption())
	h := &gatedHandler{held: make(chan struct{}), release: make(chan struct{})}
	c, err := client.New(b, client.Options{WatchExpiry: noExpiry, Logger: testLogger(),
		TransportBuilder: gatedBuilder{Builder: transport.NewBuilder(topts), h: h}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var released sync.Once
	releaseHandler := func() { released.Do(func() { close(h.release) }) }
	// Before Close: a failed test must leave nothing held.
	t.Cleanup(releaseHandler)
	t.Cleanup(x.unblock)
	sentNames := func(want ...string) {
		t.Helper()
		for {
			select {
			case r := <-x.sent:
				if len(r.GetResourceNames()) == len(want) && (len(want) == 0 || r.GetResourceNames()[len(want)-1] == want[len(want)-1]) {
					return
				}
			case <-time.After(timeout):
				t.Fatalf("no Cluster request naming %v", want)
			}
		}
	}

	w1 := newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "C1", w1)
	w2 := newRecorder[*resources.Cluster]()
	cancel2 := client.WatchCluster(c, "C2", w2)
	w1.wantUpdate(t, "C1")
	w2.wantUpdate(t, "C2")
	barrier(t, c)

	// The push: held once read, so that the removal crosses it.
	x.mu.Lock()
	x.armed = true
	x.mu.Unlock()
	if err := ms.Update(testContext(t), nodeID, testutils.Resources{Clusters: []*clusterv3.Cluster{testutils.Cluster("C1", "e1"), testutils.Cluster("C2", "e2")}}); err != nil {
		t.Fatal(err)
	}
	var nonce string
	select {
	case nonce = <-x.arrived:
	case <-time.After(timeout):
		t.Fatal("the push never arrived")
	}
	cancel2()
	sentNames("C1") // the removal, with the previous nonce: stale to the server
	barrier(t, c)   // the removal is flushed: the client forgot C2

	// The client applies the push; while the transport has not recorded
	// its verdict, C2 is wanted again.
	h.gate = nonce
	x.unblock()
	select {
	case <-h.held:
	case <-time.After(timeout):
		t.Fatal("the push was never applied")
	}
	w1.wantUpdate(t, "C1")
	w2 = newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "C2", w2)
	barrier(t, c) // the subscription is flushed to the transport
	releaseHandler()
	w2.wantUpdate(t, "C2")
}
