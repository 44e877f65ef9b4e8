package grpcxds

import (
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// Clusters that connect on their first RPC (Options.ConnectOnFirstRPC).
//
// gRPC connects the endpoints of every cluster the routes name as soon as
// the configuration arrives. A mesh-wide route configuration names
// thousands of clusters a service never calls, and each endpoint connected
// costs grpc-go an HTTP/2 transport (tens of KiB and two goroutines) and,
// when the endpoint does not answer, a redial every backoff. With the
// option a route's cluster starts idle: its priorities are built, but no
// endpoint is wanted and no failover timer runs, and its picker wakes it
// on the first pick. The RPC waits for the picker that follows, as it
// would for a cluster still connecting. A woken cluster stays awake while
// the routes name it.

// idlePicker is the picker of an idle cluster. Its first pick wakes the
// cluster on a goroutine of its own (a pick must not take mu, nor publish
// a picker from inside gRPC's pick); every pick queues its RPC.
type idlePicker struct {
	b     *xdsBalancer
	cl    *clusterLB
	woken *atomic.Bool // shared by the pickers of one idle spell
}

func (p idlePicker) pick(balancer.PickInfo, uint64) (balancer.PickResult, error) {
	if p.woken.CompareAndSwap(false, true) {
		go p.b.wake(p.cl)
	}
	return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
}

// wake connects cl, if it is still the balancer's and idle.
func (b *xdsBalancer) wake(cl *clusterLB) {
	b.mu.Lock()
	if !b.closed && b.clusters[cl.name] == cl {
		b.wakeLocked(cl)
	}
	b.finishAndUnlock()
}

// wakeLocked makes cl connect from now on: it chooses a priority, and so
// wants its endpoints, when finishAndUnlock runs.
func (b *xdsBalancer) wakeLocked(cl *clusterLB) {
	if cl.idle {
		cl.idle = false
		b.dirty[cl] = struct{}{}
	}
}

// idleLocked gives cl, not yet used, the state and picker of an idle
// cluster: nothing connected, nothing timed.
func (b *xdsBalancer) idleLocked(cl *clusterLB) {
	b.setWantedLocked(cl, nil)
	cl.stopTimer()
	cl.state = connectivity.Idle
	if _, ok := cl.picker.(idlePicker); ok {
		return // the picker of this idle spell: a wake it started is on its way
	}
	cl.picker = idlePicker{b: b, cl: cl, woken: new(atomic.Bool)}
}
