package grpcxds

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/serviceconfig"
)

// The RLS policy runs one child policy per target the lookup service
// names. Under goxds that child is rlsTarget: it routes to one cluster of
// the goxds balancer, which subscribes to the cluster for as long as a
// child wants it (the cluster is in no route).

func init() { balancer.Register(rlsTargetBuilder{}) }

// rlsTargetConfig is the child's configuration: the RLS policy fills in
// the cluster.
type rlsTargetConfig struct {
	serviceconfig.LoadBalancingConfig `json:"-"`
	Cluster                           string `json:"cluster"`
}

type rlsTargetBuilder struct{}

func (rlsTargetBuilder) Name() string { return rlsTargetPolicyName }

func (rlsTargetBuilder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	cfg := new(rlsTargetConfig)
	if err := json.Unmarshal(js, cfg); err != nil {
		return nil, fmt.Errorf("%s config: %v", rlsTargetPolicyName, err)
	}
	if cfg.Cluster == "" {
		return nil, fmt.Errorf("%s config: no cluster", rlsTargetPolicyName)
	}
	return cfg, nil
}

func (rlsTargetBuilder) Build(cc balancer.ClientConn, _ balancer.BuildOptions) balancer.Balancer {
	return &rlsTarget{cc: cc}
}

// rlsTarget is the RLS policy's child for one target: it reports the
// state of the goxds balancer's cluster of that name, and its picker
// picks in that cluster.
type rlsTarget struct {
	cc balancer.ClientConn // the RLS policy's, for this child

	mu      sync.Mutex
	b       *xdsBalancer // the goxds balancer it routes into; nil before the first config
	cluster string
	release func()

	// Guarded by b.mu: what the child last told the RLS policy (Shutdown
	// before anything), and the picker it tells it with.
	told   connectivity.State
	picker balancer.Picker
}

// UpdateClientConnState implements balancer.Balancer: the RLS policy
// names the child's cluster, and hands on the resolver state in which the
// goxds balancer put itself.
func (t *rlsTarget) UpdateClientConnState(s balancer.ClientConnState) error {
	cfg, ok := s.BalancerConfig.(*rlsTargetConfig)
	b, _ := s.ResolverState.Attributes.Value(rlsHostKey{}).(*xdsBalancer)
	if !ok || b == nil {
		// Only the goxds balancer's RLS policies build this child.
		t.cc.UpdateState(balancer.State{ConnectivityState: connectivity.TransientFailure,
			Picker: errorPicker{fmt.Errorf("%s runs only under the %s balancer", rlsTargetPolicyName, BalancerName)}})
		return balancer.ErrBadResolverState
	}
	t.mu.Lock()
	if t.b == b && t.cluster == cfg.Cluster {
		t.mu.Unlock()
		return nil
	}
	old := t.release
	t.b, t.cluster, t.release = b, cfg.Cluster, nil
	t.mu.Unlock()
	if old != nil {
		old()
	}
	release := b.addTarget(t, cfg.Cluster)
	t.mu.Lock()
	t.release = release
	t.mu.Unlock()
	return nil
}

// ResolverError implements balancer.Balancer; the goxds balancer's state
// is what counts.
func (t *rlsTarget) ResolverError(error) {}

// UpdateSubConnState implements balancer.Balancer; the child has no
// SubConns of its own.
func (t *rlsTarget) UpdateSubConnState(balancer.SubConn, balancer.SubConnState) {}

// ExitIdle implements balancer.Balancer; the goxds balancer connects the
// cluster's endpoints.
func (t *rlsTarget) ExitIdle() {}

// Close implements balancer.Balancer: the cluster is released.
func (t *rlsTarget) Close() {
	t.mu.Lock()
	release := t.release
	t.release, t.b = nil, nil
	t.mu.Unlock()
	if release != nil {
		release()
	}
}

// rlsTargetPicker picks in one cluster of the goxds balancer, by the
// balancer's picker in force at each pick.
type rlsTargetPicker struct {
	b       *xdsBalancer
	cluster string
}

// Pick implements balancer.Picker.
func (p rlsTargetPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	rp := p.b.rls.published.Load()
	if rp == nil {
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	cp := rp.clusters.Get(p.cluster)
	if cp == nil {
		// Not in the configuration yet: the tree subscribes to it, and
		// the balancer publishes a new picker when it comes.
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	// The RPC's request hash, for a ring_hash cluster, as its route
	// computed it; a random one for an RPC without the interceptors.
	hash := rand.Uint64()
	if sel := selectionOf(info.Ctx); sel != nil {
		hash = sel.hash
	}
	return pickIn(cp, info, hash)
}
