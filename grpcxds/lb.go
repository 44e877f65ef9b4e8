package grpcxds

import (
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
	r, err := cp.Pick(info.Ctx, hash)
	if err != nil {
		return balancer.PickResult{}, pickError(err)
	}
	if c, _ := r.Conn.(*subConn); c != nil && c.group.Load() != nil {
		return pickScaled(c, r, sel)
	}
	// The closure holds the Done (three pointers and a flag), as the
	// cluster's own closure did before there was a cluster layer: one
	// 48 B allocation per RPC.
	done := r.Done
	if sel != nil && sel.wantTrailer {
		// A unary attempt that may be retried: its trailer, for the
		// server's pushback. gRPC calls Done on the RPC's goroutine before
		// the attempt returns, with the trailer it has copied for Done
		// anyway.
		return balancer.PickResult{SubConn: sc(r.Conn), Done: func(di balancer.DoneInfo) {
			sel.trailer = di.Trailer
			done.Finish(di.Err, di.ServerLoad)
		}}, nil
	}
	return balancer.PickResult{SubConn: sc(r.Conn), Done: func(di balancer.DoneInfo) {
		done.Finish(di.Err, di.ServerLoad)
	}}, nil
}

// pickScaled is pickFor's end for an endpoint of several connections
// (gRFC A105, scale.go): one of them, whose RPC count the Done gives back.
func pickScaled(c *subConn, r cluster.Result, sel *selection) (balancer.PickResult, error) {
	g := c.group.Load()
	m, queue := g.pick()
	if queue {
		r.Done.Abandon()
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	sc := c.SubConn // none ready: gRPC picks again once it sees so
	if m != nil {
		sc = m.sc
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
