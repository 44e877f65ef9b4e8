package grpcxds

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/serviceconfig"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/grpcxds/xdscreds"
)

// The balancer's registration, its builder and its config in the service
// config the resolver hands the channel.

func init() { balancer.Register(balancerBuilder{}) }

// lbConfigJSON is the balancer's config in the service config.
type lbConfigJSON struct {
	// FailoverTimeout is a Go duration ("10s"); "" means the default.
	FailoverTimeout string `json:"failoverTimeout,omitempty"`
	// ConnectOnFirstRPC leaves the routes' clusters idle until an RPC
	// picks them (idle.go).
	ConnectOnFirstRPC bool `json:"connectOnFirstRPC,omitempty"`
	// ClusterIdleTimeout is a Go duration ("30m"): with ConnectOnFirstRPC,
	// a cluster unused this long goes idle again; "": never.
	ClusterIdleTimeout string `json:"clusterIdleTimeout,omitempty"`
}

// lbConfig is the parsed lbConfigJSON.
type lbConfig struct {
	serviceconfig.LoadBalancingConfig
	failoverTimeout    time.Duration
	connectOnFirstRPC  bool
	clusterIdleTimeout time.Duration
}

type balancerBuilder struct{}

func (balancerBuilder) Name() string { return BalancerName }

func (balancerBuilder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	b := &xdsBalancer{
		cc:              cc,
		bopts:           opts,
		xdsCreds:        xdscreds.UsesXDS(opts.DialCreds),
		security:        make(map[string]*secEntry),
		warnedPlain:     make(map[string]bool),
		channelID:       rand.Uint64(),
		failoverTimeout: DefaultFailoverTimeout,
		clock:           realClock{},
		logger:          client.DefaultLogger(),
		clusters:        make(map[string]*clusterLB),
		dns:             make(map[string]*dnsWatch),
		inflight:        make(map[string]*atomic.Int64),
		inflightRefs:    make(map[string]int),
		staleCounters:   make(map[string]struct{}),
		aggUsers:        make(map[string]map[*clusterLB]struct{}),
		loads:           make(map[string]*heldStore),
		dirty:           make(map[*clusterLB]struct{}),
		changes:         make(map[string]clusterPicker),
	}
	b.pool = endpoint.NewPool(b, b.endpointChanged)
	return b
}

func (balancerBuilder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	var in lbConfigJSON
	if err := json.Unmarshal(js, &in); err != nil {
		return nil, fmt.Errorf("%s config: %v", BalancerName, err)
	}
	cfg := &lbConfig{failoverTimeout: DefaultFailoverTimeout, connectOnFirstRPC: in.ConnectOnFirstRPC}
	if in.FailoverTimeout != "" {
		d, err := time.ParseDuration(in.FailoverTimeout)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s config: failoverTimeout %q: want a positive duration", BalancerName, in.FailoverTimeout)
		}
		cfg.failoverTimeout = d
	}
	if in.ClusterIdleTimeout != "" {
		d, err := time.ParseDuration(in.ClusterIdleTimeout)
		if err != nil || d <= 0 || !in.ConnectOnFirstRPC {
			return nil, fmt.Errorf("%s config: clusterIdleTimeout %q: want a positive duration, with connectOnFirstRPC", BalancerName, in.ClusterIdleTimeout)
		}
		cfg.clusterIdleTimeout = d
	}
	return cfg, nil
}
