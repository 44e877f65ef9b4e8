package grpcxds

import (
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
)

// One endpoint's change of state replaces one cluster's picker: the next
// route picker shares every other shard of pickers with the last one, and
// the SubConns are not all looked at again. Rebuilding a map of every
// cluster for each SubConn's report cost O(clusters) each, O(clusters²)
// when every endpoint of a configuration failed in turn.
func TestSubConnStateCopiesOneShard(t *testing.T) {
	t.Parallel()
	const n = 2000
	var last *routePicker
	cc := &stuckCC{onUpdate: func(s balancer.State) { last, _ = s.Picker.(*routePicker) }}
	var listeners []func(balancer.SubConnState)
	lcc := &listenerCC{stuckCC: cc, listeners: &listeners}
	b := newStuckBalancer(cc, &manualClock{now: time.Unix(1000, 0)}, time.Minute)
	b.cc = lcc
	defer b.Close()
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: clustersState(n)}); err != nil {
		t.Fatal(err)
	}
	if last == nil || len(listeners) != n {
		t.Fatalf("after the configuration: picker %v, %d SubConns, want %d", last, len(listeners), n)
	}
	before := last
	listeners[0](balancer.SubConnState{ConnectivityState: connectivity.Ready})
	if last == before {
		t.Fatal("an endpoint became ready, and no picker was published")
	}
	// The shards are the map's own (package dataplane/cluster): read
	// through reflection, as this test is about what the balancer
	// publishes.
	beforeGroups, lastGroups := reflect.ValueOf(before.clusters).FieldByName("groups"), reflect.ValueOf(last.clusters).FieldByName("groups")
	k := int(reflect.ValueOf(before.clusters).FieldByName("k").Int())
	differ, shards := 0, 0
	for g := range beforeGroups.Len() {
		for j := range beforeGroups.Index(g).Len() {
			shards++
			if beforeGroups.Index(g).Index(j).UnsafePointer() != lastGroups.Index(g).Index(j).UnsafePointer() {
				differ++
			}
		}
	}
	if differ != 1 || shards != k || int(reflect.ValueOf(last.clusters).FieldByName("k").Int()) != k {
		t.Errorf("one cluster's picker changed: %d of %d shards copied (now %d), want 1", differ, k, reflect.ValueOf(last.clusters).FieldByName("k").Int())
	}
	groups := 0
	for i := range beforeGroups.Len() {
		if beforeGroups.Index(i).Index(0).Addr().UnsafePointer() != lastGroups.Index(i).Index(0).Addr().UnsafePointer() {
			groups++
		}
	}
	if groups != 1 {
		t.Errorf("one cluster's picker changed: %d of %d shard groups copied, want 1", groups, beforeGroups.Len())
	}
	b.mu.Lock()
	pending := b.set.Stats().PrunePending
	b.mu.Unlock()
	if pending {
		t.Error("pruneConns left set")
	}
}

// listenerCC is a stuckCC that keeps its SubConns' state listeners.
type listenerCC struct {
	*stuckCC
	listeners *[]func(balancer.SubConnState)
}

func (cc *listenerCC) NewSubConn(_ []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	*cc.listeners = append(*cc.listeners, opts.StateListener)
	return stuckSC{}, nil
}
