package grpcxds

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
)

func TestPickerMap(t *testing.T) {
	t.Parallel()
	clusters := make(map[string]*clusterLB)
	for i := range 1000 {
		cl := newClusterLB(fmt.Sprint("c", i))
		clusters[cl.name] = cl
	}
	m := newPickerMap(clusters)
	if m.len() != 1000 || m.get("c7") == nil || m.get("nope") != nil || !m.balanced(1000) {
		t.Fatalf("newPickerMap: len %d, c7 %v, nope %v", m.len(), m.get("c7"), m.get("nope"))
	}
	p := errorPicker{fmt.Errorf("x")}
	m2 := m.with(map[string]clusterPicker{"c7": p, "c8": nil, "new": p})
	if m2.len() != 1000 || m2.get("c7") != p || m2.get("c8") != nil || m2.get("new") != p {
		t.Errorf("with: len %d, c7 %v, c8 %v, new %v", m2.len(), m2.get("c7"), m2.get("c8"), m2.get("new"))
	}
	if m.len() != 1000 || m.get("c7") == p || m.get("c8") == nil || m.get("new") != nil {
		t.Error("with changed the map it was called on")
	}
	if z := (pickerMap{}).with(map[string]clusterPicker{"a": p}); z.len() != 1 || z.get("a") != p {
		t.Errorf("with on the zero map: len %d, a %v", z.len(), z.get("a"))
	}
	if m.balanced(100_000) || m.balanced(10) {
		t.Error("a map of 1000 pickers suits 10 or 100,000")
	}
}

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
	differ := 0
	for i := range before.clusters.k {
		if reflect.ValueOf(before.clusters.shard(i)).UnsafePointer() != reflect.ValueOf(last.clusters.shard(i)).UnsafePointer() {
			differ++
		}
	}
	if differ != 1 || last.clusters.k != before.clusters.k {
		t.Errorf("one cluster's picker changed: %d of %d shards copied (now %d), want 1", differ, before.clusters.k, last.clusters.k)
	}
	groups := 0
	for i := range before.clusters.groups {
		if &before.clusters.groups[i][0] != &last.clusters.groups[i][0] {
			groups++
		}
	}
	if groups != 1 {
		t.Errorf("one cluster's picker changed: %d of %d shard groups copied, want 1", groups, len(before.clusters.groups))
	}
	if b.pruneConns {
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
