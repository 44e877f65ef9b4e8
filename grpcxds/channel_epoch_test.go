package grpcxds

import (
	"log/slog"
	"sync"
	"testing"

	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/resources"
)

// closedCC is the resolver.ClientConn of a channel whose resolver has
// closed: gRPC drops what it is handed, and says nothing.
type closedCC struct{ resolver.ClientConn }

func (closedCC) UpdateState(resolver.State) error { return nil }

// The tree does not wait for a callback under way when its watch is
// cancelled, so a resolver's Update may run on after Close returned (the
// channel going idle, or closing). What it set used to become the
// configuration in force for the next resolver's RPCs; and, since no
// balancer hears a closed resolver, that configuration was the error
// saying the channel ignores xDS, which the log repeated.
func TestClosedResolverSetsNothing(t *testing.T) {
	t.Parallel()
	snap, _ := SnapshotFromState(clustersState(2))
	snap.Listener, snap.RouteConfig = &resources.Listener{}, &resources.RouteConfig{}
	var (
		mu    sync.Mutex
		lines []slog.Record
	)
	cs := newChannelState(&Builder{})
	r := &xdsResolver{cc: closedCC{}, cs: cs, epoch: cs.epochNow(), listener: "l",
		logger: slog.New(recordingHandler{msg: "the channel ignores the xDS configuration", mu: &mu, records: &lines})}
	// The goxds balancer took the resolver's configurations so far.
	cs.gen = 5
	cs.balancerGen.Store(5)
	cs.reset() // Close: the tree's watch cancelled, its callback under way
	r.Update(snap)
	cs.mu.Lock()
	cfg := cs.cfg
	cs.mu.Unlock()
	if cfg != nil {
		t.Errorf("an Update after Close set the configuration in force (gen %d, err %v)", cfg.gen, cfg.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 0 {
		t.Errorf("an Update after Close logged %q", lines[0].Message)
	}
	// The next resolver's configurations apply.
	if !cs.setFrom(cs.epochNow(), &channelConfig{gen: 9}) {
		t.Error("the next resolver's configuration was refused")
	}
}
