package grpcxds

import (
	"context"
	"sync"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/cluster"
)

// errorPicker fails every RPC with err: a status error ends the RPC with
// that status; any other error fails it with UNAVAILABLE, or keeps a
// wait-for-ready RPC waiting.
type errorPicker struct{ err error }

func (p errorPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	// The channel's picker while it has no configuration: tests hear of
	// its picks as of routePicker's.
	observePick(info, p.err)
	return balancer.PickResult{}, p.err
}

// pickIn picks in a cluster for an RPC whose request hash (for ring_hash)
// is hash, in gRPC's terms: the endpoint's SubConn, and a Done that hands
// the cluster the RPC's outcome.
func pickIn(cp cluster.Picker, info balancer.PickInfo, hash uint64) (balancer.PickResult, error) {
	var sel *selection
	if info.Ctx != nil { // gRPC's picks always have one
		sel = selectionOf(info.Ctx)
	}
	return pickFor(cp, info, hash, sel)
}

// pickFor is pickIn for the RPC of sel (nil: one without the goxds
// interceptors).
func pickFor(cp cluster.Picker, info balancer.PickInfo, hash uint64, sel *selection) (balancer.PickResult, error) {
	if sel != nil && nQueued.Load() != 0 {
		releasePlace(sel) // queued for a connection, picked again (scale_held.go)
	}
	r, err := cp.Pick(info.Ctx, hash)
	if err != nil {
		return balancer.PickResult{}, pickError(err)
	}
	if c, _ := r.Conn.(*subConn); c != nil && c.group.Load() != nil {
		return pickScaled(c, r, info.Ctx, sel) // gRFC A105 (scale.go)
	}
	d := newPickDone()
	d.done = r.Done
	if sel != nil && sel.wantTrailer {
		// A unary attempt that may be retried: its trailer, for the
		// server's pushback. gRPC calls Done on the RPC's goroutine before
		// the attempt returns, with the trailer it has copied for Done
		// anyway.
		d.sel = sel
	}
	return balancer.PickResult{SubConn: sc(r.Conn), Done: d.finish}, nil
}

// pickDone is the Done of one pick: the cluster's record of the RPC's end,
// and the selection that wants the attempt's trailer (nil: none). A func
// made per pick would be an allocation per RPC (a closure of 48 B or
// more); a pickDone is made once, with its func (finish), and goes back to
// pickDones when gRPC has called that func: gRPC calls a pick's Done once
// at most (a pick whose SubConn is not ready, and is dropped for a new
// one, included), so nothing calls it after it is back. One gRPC never
// calls (an RPC that picked a SubConn of a closed channel) is left to the
// collector.
type pickDone struct {
	done   cluster.Done
	sel    *selection
	finish func(balancer.DoneInfo) // the method value of (*pickDone).end
}

// pickDones are the pickDones that gRPC is done with.
var pickDones sync.Pool

// newPickDone returns a pickDone from pickDones, or a new one.
func newPickDone() *pickDone {
	if d, ok := pickDones.Get().(*pickDone); ok {
		return d
	}
	d := new(pickDone)
	d.finish = d.end
	return d
}

// end hands the cluster the outcome of the RPC (or of its attempt) that d
// was picked for, and the selection its trailer; d goes back to pickDones
// first, holding nothing of the RPC.
func (d *pickDone) end(di balancer.DoneInfo) {
	done, sel := d.done, d.sel
	d.done, d.sel = cluster.Done{}, nil
	pickDones.Put(d)
	if sel != nil {
		sel.trailer = di.Trailer
	}
	done.Finish(di.Err, di.ServerLoad)
}

// pickScaled is pickFor's end for an endpoint of several connections
// (gRFC A105, scale.go): one of them, whose RPC count the Done gives back.
// An RPC queued for a connection keeps its place under the circuit
// breaker until it is picked again (scale_held.go).
func pickScaled(c *subConn, r cluster.Result, ctx context.Context, sel *selection) (balancer.PickResult, error) {
	g := c.group.Load()
	m, queue := g.Pick()
	if queue {
		queuedPicks.Add(1)
		if sel != nil && ctx != nil {
			holdPlace(ctx, sel, r.Done)
		} else {
			r.Done.Abandon()
		}
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	sc := c.SubConn // none ready: gRPC picks again once it sees so
	if m != nil {
		sc = m.Conn.sc
	}
	done := r.Done
	return balancer.PickResult{SubConn: sc, Done: func(di balancer.DoneInfo) {
		if m != nil {
			g.released(m)
		}
		if sel != nil && sel.wantTrailer {
			sel.trailer = di.Trailer
		}
		done.Finish(di.Err, di.ServerLoad)
	}}, nil
}

// pickError is gRPC's error for a cluster's: a request to hold is
// balancer.ErrNoSubConnAvailable, a drop and a circuit breaker's refusal
// fail the RPC UNAVAILABLE (wait-for-ready or not); any other reason
// (the cluster's configuration, its endpoints failing) is left as it is,
// for gRPC to fail the RPC UNAVAILABLE unless it waits for ready.
func pickError(err error) error {
	if err == cluster.ErrQueue {
		return balancer.ErrNoSubConnAvailable
	}
	switch e := err.(type) {
	case *cluster.DropError:
		return status.Error(codes.Unavailable, e.Error())
	case *cluster.OverloadError:
		return status.Error(codes.Unavailable, e.Error())
	}
	return err
}
