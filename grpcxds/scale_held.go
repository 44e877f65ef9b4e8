package grpcxds

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/goxds/xds/dataplane/cluster"
)

// Circuit breaking of RPCs queued for a connection (gRFC A105's
// "Interaction with xDS Circuit Breaking"). The gRFC counts an RPC its
// subchannel queues against the cluster's max_requests, from the
// cluster's pick to the RPC's end; grpc-go's cluster_impl gives the count
// of a pick that queues back at once, since every pick counts anew. An
// RPC an endpoint.Group queues waits in grpc-go's picker queue, and is
// picked again, through the cluster's circuit breaker, at the next
// picker; so it keeps its place (cluster.Done.Queue) until then: given
// back as its next pick starts (pickFor), which counts it anew, or when
// the context it was picked for ends first (grpc-go cancels an RPC's
// context however it ends: failed by a later pick, by the channel's
// closing, or by the application), from the context's goroutine: at
// once, but maybe after the RPC returned. An RPC without the goxds
// interceptors, which has no per-RPC state to find the place by, gives
// it back at once (cluster.Done.Abandon).
var (
	// queuedPlaces are the places held, by RPC (*selection →
	// *queuedPlace); nQueued counts them, so that a pick looks only when
	// some RPC holds one.
	queuedPlaces sync.Map
	nQueued      atomic.Int64
)

// queuedPlace is the place of one queued RPC.
type queuedPlace struct {
	place cluster.Place
	stop  func() bool // stops the release at the RPC's context's end
}

// holdPlace keeps the place of sel's RPC, whose pick for ctx was queued,
// until the RPC is picked again or ends.
func holdPlace(ctx context.Context, sel *selection, d cluster.Done) {
	q := &queuedPlace{place: d.Queue()}
	q.stop = context.AfterFunc(ctx, func() { q.release(sel) })
	nQueued.Add(1)
	if prev, loaded := queuedPlaces.Swap(sel, q); loaded {
		// A place of sel's held already, which this pick's start gave
		// back; should one be left, it is not to be kept for ever.
		p := prev.(*queuedPlace)
		p.stop()
		nQueued.Add(-1)
		p.place.Release()
	}
	if ctx.Err() != nil {
		q.release(sel) // ended before it was stored: the AfterFunc missed it
	}
}

// release gives q's place back, once, if it is still sel's.
func (q *queuedPlace) release(sel *selection) {
	if queuedPlaces.CompareAndDelete(sel, q) {
		nQueued.Add(-1)
		q.place.Release()
	}
}

// releasePlace gives back the place sel's RPC holds, if any: it is picked
// again.
func releasePlace(sel *selection) {
	if v, ok := queuedPlaces.Load(sel); ok {
		q := v.(*queuedPlace)
		q.stop()
		q.release(sel)
	}
}
