package testutils

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
)

// ErrStreamEnded is returned when waiting for a request of a stream that has
// ended and whose requests have all been read, and when sending on a stream
// that has ended. ErrServerStopped is returned by waits on a stopped
// FakeServer once nothing is left to read.
var (
	ErrStreamEnded   = errors.New("testutils: the stream has ended")
	ErrServerStopped = errors.New("testutils: the fake server has stopped")
)

// Request is one request a FakeServer received, as recorded.
type Request struct {
	StreamID int       // the FakeStream it came on
	Received time.Time // when the server read it
	// Exactly one of SotW and Delta is set, by the kind of stream.
	SotW  *discoveryv3.DiscoveryRequest
	Delta *discoveryv3.DeltaDiscoveryRequest
}

// FakeStream is one stream a client opened on a FakeServer: an ADS stream
// or a per-type one. Its methods
// are safe for concurrent use.
type FakeStream struct {
	// ID numbers the streams of a FakeServer in the order they opened, from 1,
	// SotW and delta streams alike.
	ID int
	// Delta tells whether the stream is a delta stream
	// (DeltaAggregatedResources, or a per-type Delta* RPC).
	Delta bool
	// TypeURL is the type of a per-type stream (StreamListeners,
	// DeltaClusters, ...), and "" for an ADS stream.
	TypeURL string
	// Opened is when the server accepted the stream.
	Opened time.Time

	reqs *queue[Request] // this stream's requests; closed when Recv fails
	cut  chan error      // the status to end the stream with; buffered, 1
	done chan struct{}   // closed once the handler has returned

	sendMu sync.Mutex        // held while sending; serializes grpc SendMsg
	ended  bool              // guarded by sendMu: the handler has returned
	gs     grpc.ServerStream // guarded by sendMu for sending
}

// NextRequest waits for the next request of this SotW stream not yet read
// through this stream. It fails on a delta stream, when ctx is done, or with
// ErrStreamEnded once the stream has ended and every request has been read.
func (st *FakeStream) NextRequest(ctx context.Context) (*discoveryv3.DiscoveryRequest, error) {
	if st.Delta {
		return nil, fmt.Errorf("testutils: stream %d is a delta stream", st.ID)
	}
	r, err := st.reqs.next(ctx)
	return r.SotW, err
}

// NextDeltaRequest is NextRequest for a delta stream.
func (st *FakeStream) NextDeltaRequest(ctx context.Context) (*discoveryv3.DeltaDiscoveryRequest, error) {
	if !st.Delta {
		return nil, fmt.Errorf("testutils: stream %d is a SotW stream", st.ID)
	}
	r, err := st.reqs.next(ctx)
	return r.Delta, err
}

// Requests returns every request received on this stream so far, in order.
func (st *FakeStream) Requests() []Request { return st.reqs.all() }

// Send sends resp, as it is, on this SotW stream.
func (st *FakeStream) Send(resp *discoveryv3.DiscoveryResponse) error {
	if st.Delta {
		return fmt.Errorf("testutils: stream %d is a delta stream", st.ID)
	}
	return st.send(resp)
}

// SendDelta sends resp, as it is, on this delta stream.
func (st *FakeStream) SendDelta(resp *discoveryv3.DeltaDiscoveryResponse) error {
	if !st.Delta {
		return fmt.Errorf("testutils: stream %d is a SotW stream", st.ID)
	}
	return st.send(resp)
}

func (st *FakeStream) send(m any) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if st.ended {
		return fmt.Errorf("testutils: sending on stream %d: %w", st.ID, ErrStreamEnded)
	}
	if err := st.gs.SendMsg(m); err != nil {
		return fmt.Errorf("testutils: sending on stream %d: %w", st.ID, err)
	}
	return nil
}

// Cut ends the stream: the client sees err as the RPC's status (make it with
// status.Error; nil ends the RPC with OK). Cutting an ended stream does
// nothing. Cut returns without waiting; Done tells when the stream is over.
func (st *FakeStream) Cut(err error) {
	select {
	case st.cut <- err:
	default: // already cut
	}
}

// Done is closed once the stream has ended, whoever ended it.
func (st *FakeStream) Done() <-chan struct{} { return st.done }

// serve runs the stream until the client goes away, a test cuts it or the
// server stops, and returns the status to end the RPC with.
// recv reads one request; it runs on its own goroutine, tracked by wg, until
// it fails, which happens at the latest when the handler has returned.
func (st *FakeStream) serve(s *FakeServer, recv func() (Request, error)) error {
	recvDone := make(chan struct{})
	s.workers.Add(1)
	go func() {
		defer s.workers.Done()
		defer close(recvDone)
		defer st.reqs.closeWith(ErrStreamEnded)
		for {
			r, err := recv()
			if err != nil {
				return
			}
			r.StreamID, r.Received = st.ID, time.Now()
			s.record(st, r)
		}
	}()

	var ret error
	select {
	case <-recvDone: // the client hung up, or Stop closed the connection
	case ret = <-st.cut:
	}
	st.sendMu.Lock()
	st.ended = true
	st.sendMu.Unlock()
	close(st.done)
	return ret
}

// queue is an append-only log of items with one read cursor. next waits for
// the item under the cursor; closeWith says no more items will come.
type queue[T any] struct {
	mu     sync.Mutex
	items  []T
	read   int           // index of the item next returns
	closed error         // set by closeWith: what next returns once drained
	wake   chan struct{} // closed and replaced whenever items or closed change
}

func newQueue[T any]() *queue[T] {
	return &queue[T]{wake: make(chan struct{})}
}

func (q *queue[T]) push(v T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = append(q.items, v)
	close(q.wake)
	q.wake = make(chan struct{})
}

// closeWith makes next return err once every item has been read; later
// calls change nothing.
func (q *queue[T]) closeWith(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed == nil {
		q.closed = err
		close(q.wake)
		q.wake = make(chan struct{})
	}
}

func (q *queue[T]) next(ctx context.Context) (T, error) {
	for {
		q.mu.Lock()
		if q.read < len(q.items) {
			v := q.items[q.read]
			q.read++
			q.mu.Unlock()
			return v, nil
		}
		closed, wake := q.closed, q.wake
		q.mu.Unlock()
		var zero T
		if closed != nil {
			return zero, closed
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}

func (q *queue[T]) all() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]T(nil), q.items...)
}

func (q *queue[T]) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}
