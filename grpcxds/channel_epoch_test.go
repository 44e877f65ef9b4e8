package grpcxds

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/resources"
)

// closedCC is the resolver.ClientConn of a channel whose resolver has
// closed: gRPC drops what it is handed, and says nothing; or, with refuse,
// the channel's policy refuses it (as one other than the goxds balancer
// does: it is handed no addresses).
type closedCC struct {
	resolver.ClientConn
	refuse bool
}

func (c closedCC) UpdateState(resolver.State) error {
	if c.refuse {
		return balancer.ErrBadResolverState
	}
	return nil
}

// The tree does not wait for a callback under way when its watch is
// cancelled, so a resolver's Update may run on after Close returned (the
// channel going idle, or closing). What it set used to become the
// configuration in force for the next resolver's RPCs; and, since no
// balancer hears a closed resolver, that configuration was the error
// saying the channel ignores xDS, which the log repeated.
func TestClosedResolverSetsNothing(t *testing.T) {
	t.Parallel()
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refused=%v", refuse), func(t *testing.T) {
			snap, _ := SnapshotFromState(clustersState(2))
			snap.Listener, snap.RouteConfig = &resources.Listener{}, &resources.RouteConfig{}
			var (
				mu    sync.Mutex
				lines []slog.Record
			)
			cs := newChannelState(&Builder{})
			r := &xdsResolver{cc: closedCC{refuse: refuse}, listener: "l", source: source{cs: cs, epoch: cs.epochNow(),
				logger: slog.New(recordingHandler{msg: "the channel ignores the xDS configuration", mu: &mu, records: &lines})}}
			cs.gen = 5
			cs.reset() // Close: the tree's watch cancelled, its callback under way
			r.Update(snap)
			r.ResourceError(errors.New("listener gone"))
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
		})
	}
}

// queuingCC is a channel that hands the states its resolver sends to the
// balancer later, as the resolver.ClientConn contract allows: UpdateState
// returns before the balancer has seen the state.
type queuingCC struct {
	resolver.ClientConn
	states chan resolver.State
}

func (c queuingCC) UpdateState(s resolver.State) error {
	c.states <- s
	return nil
}

// The interceptors' configuration is the one the goxds balancer took,
// whenever gRPC runs it. The resolver used to learn that the balancer ran
// by reading, once UpdateState returned, the generation the balancer had
// stored, which holds only while grpc-go runs the balancer inside
// UpdateState: a channel whose balancer ran later was taken for one that
// ignores the service config, and its RPCs failed.
func TestBalancerRunAfterUpdateStateReturns(t *testing.T) {
	t.Parallel()
	snap, _ := SnapshotFromState(clustersState(2))
	snap.Listener, snap.RouteConfig = &resources.Listener{}, &resources.RouteConfig{}
	cs := newChannelState(&Builder{})
	cc := queuingCC{states: make(chan resolver.State, 2)}
	r := &xdsResolver{cc: cc, listener: "l", source: source{cs: cs, epoch: cs.epochNow(), logger: slog.New(slog.DiscardHandler)}}
	bal := newStuckBalancer(&stuckCC{}, realClock{}, time.Minute)
	defer bal.Close()

	current := func() *channelConfig {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		return cs.cfg
	}
	r.Update(snap)
	if cfg := current(); cfg != nil {
		t.Fatalf("before the balancer ran, the interceptors have a configuration (gen %d, err %v); want none yet", cfg.gen, cfg.err)
	}
	if err := bal.UpdateClientConnState(balancer.ClientConnState{ResolverState: <-cc.states}); err != nil {
		t.Fatal(err)
	}
	cfg := current()
	if cfg == nil || cfg.err != nil || cfg.snap != snap {
		t.Fatalf("after the balancer took the snapshot, the interceptors have %+v; want its configuration", cfg)
	}
	// A later error state reaches them the same way, not before.
	r.ResourceError(errors.New("listener gone"))
	if got := current(); got != cfg {
		t.Fatalf("before the balancer ran, the interceptors' configuration changed to gen %d", got.gen)
	}
	if err := bal.UpdateClientConnState(balancer.ClientConnState{ResolverState: <-cc.states}); err != nil {
		t.Fatal(err)
	}
	if got := current(); got.err == nil || !strings.Contains(got.err.Error(), "listener gone") {
		t.Fatalf("after the balancer took the error, the interceptors have %+v; want the error", got)
	}
}
