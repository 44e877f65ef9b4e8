package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/resources"
)

// queuingConn is a PendingConn whose Dispatch says what free holds.
type queuingConn struct {
	fakeConn
	free *atomic.Bool
}

func (c queuingConn) Dispatch() bool { return c.free.Load() }

type queuingDialer struct{ free *atomic.Bool }

func (d queuingDialer) NewConn(*endpoint.Endpoint) (endpoint.Conn, error) {
	return queuingConn{free: d.free}, nil
}
func (queuingDialer) Dropped(*endpoint.Endpoint) {}

// limitedPriority is a ready priority of one endpoint whose connection
// finds a free connection when free holds, with limits.
func limitedPriority(free *atomic.Bool, limits *Limits) *priority {
	p := &priority{leaf: "c", maxRequests: 1024, inflight: &leafCounter{limits: limits},
		lb: lbpolicy.Leaf{Policy: &resources.LBPolicy{}}}
	pool := endpoint.NewPool(queuingDialer{free}, nil)
	c, _ := pool.Get([]string{"a"}, "")
	pool.Want(c)
	pool.SetState(c, c.Conn(), endpoint.Ready, nil)
	p.lb.Localities = []lbpolicy.Locality{{Weight: 1, Endpoints: []lbpolicy.WeightedEndpoint{{Endpoint: c, Weight: 1}}}}
	return p
}

// max_pending_requests: a request whose endpoint has no free connection
// is pending until the transport ends its wait; past the limit the pick
// is refused at once, as max_requests refuses, and gives back its
// in-flight place
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/circuit_breaking).
func TestPickerMaxPendingRequests(t *testing.T) {
	free := new(atomic.Bool)
	lim := &Limits{leaf: "c"}
	lim.set(1, 10)
	p := limitedPriority(free, lim)
	pk := readyPicker(t, p)

	free.Store(true)
	res, err := pk.Pick(nil, 0)
	if err != nil || res.Pending || res.Limits != lim {
		t.Fatalf("a free connection: pending %v, limits %p, err %v; want dispatched with the leaf's limits", res.Pending, res.Limits, err)
	}
	free.Store(false)
	waiting, err := pk.Pick(nil, 0)
	if err != nil || !waiting.Pending {
		t.Fatalf("no free connection: pending %v, err %v; want pending", waiting.Pending, err)
	}
	_, err = pk.Pick(nil, 0)
	var over *OverloadError
	if !errors.As(err, &over) || !over.Pending || over.MaxPendingRequests != 1 || over.Cluster != "c" {
		t.Fatalf("second pending request: %v, want max_pending_requests' OverloadError", err)
	}
	if n := p.inflight.Load(); n != 2 {
		t.Errorf("%d requests in flight after the refusal, want 2", n)
	}
	if st := lim.Stats(); st.Pending != 1 || st.PendingOverflows != 1 {
		t.Errorf("stats %+v, want 1 pending, 1 overflow", st)
	}
	lim.EndPending()
	if res, err := pk.Pick(nil, 0); err != nil || !res.Pending {
		t.Errorf("after the wait ended: pending %v, err %v; want pending", res.Pending, err)
	}

	// Without Config.ConnectionLimits (gRPC), Dispatch is not asked.
	p = limitedPriority(free, nil)
	for range 3 {
		if res, err := readyPicker(t, p).Pick(nil, 0); err != nil || res.Pending || res.Limits != nil {
			t.Fatalf("no limits: pending %v, limits %v, err %v", res.Pending, res.Limits, err)
		}
	}
}

// max_connections: a connection past the limit waits for one of the
// cluster's to close, or for the limit to rise, unless forced (its
// endpoint has none); its wait ends with its context, stop or abandon.
func TestLimitsMaxConnections(t *testing.T) {
	lim := &Limits{leaf: "c"}
	lim.set(1024, 1)
	waits := make(chan struct{}, 4)
	lim.waiting = func() { waits <- struct{}{} }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lim.AcquireConn(ctx, false, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := lim.AcquireConn(ctx, true, nil, nil); err != nil {
		t.Fatalf("forced: %v", err)
	}
	acquired := make(chan error, 1)
	go func() { acquired <- lim.AcquireConn(ctx, false, nil, nil) }()
	<-waits
	lim.ReleaseConn()
	select {
	case err := <-acquired:
		t.Fatalf("acquired with 1 of max 1 open: %v", err)
	default:
	}
	lim.ReleaseConn()
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	// A raised limit wakes a waiter.
	go func() { acquired <- lim.AcquireConn(ctx, false, nil, nil) }()
	<-waits
	lim.set(1024, 2)
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	if st := lim.Stats(); st.Connections != 2 || st.ConnectionOverflows != 2 {
		t.Errorf("stats %+v, want 2 connections, 2 overflows", st)
	}
	// stop and the context end a wait.
	stop := make(chan struct{})
	go func() { acquired <- lim.AcquireConn(ctx, false, stop, nil) }()
	<-waits
	close(stop)
	if err := <-acquired; !errors.Is(err, ErrConnWaitStopped) {
		t.Errorf("stopped: %v", err)
	}
	abandon := make(chan struct{})
	go func() { acquired <- lim.AcquireConn(ctx, false, nil, abandon) }()
	<-waits
	close(abandon)
	if err := <-acquired; !errors.Is(err, ErrConnNotWanted) {
		t.Errorf("abandoned: %v", err)
	}
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	if err := lim.AcquireConn(done, false, nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
