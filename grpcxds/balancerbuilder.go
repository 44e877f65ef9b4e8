package grpcxds

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/serviceconfig"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/grpcxds/xdscreds"
	"github.com/goxds/xds/resources"
)

// The balancer's registration, its builder and its config in the service
// config the resolver hands the channel.

func init() { balancer.Register(balancerBuilder{}) }

// lbConfigJSON is the balancer's config in the service config.
type lbConfigJSON struct {
	// FailoverTimeout is a Go duration ("10s"); "" means the default.
	FailoverTimeout string `json:"failoverTimeout,omitempty"`
	// ConnectOnFirstRPC leaves the routes' clusters idle until an RPC
	// picks them (package dataplane/cluster, idle.go).
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
		cc:       cc,
		bopts:    opts,
		xdsCreds: xdscreds.UsesXDS(opts.DialCreds),
		tls:      tlsState{warnedPlain: make(map[string]bool)},
		ch:       channelInfo{id: rand.Uint64(), maxConns: 1},
		scale:    scaleState{on: resources.ConnectionScalingEnabled()},
		clock:    lbpolicy.RealClock{},
	}
	b.logger = client.DefaultLogger()
	b.set = cluster.NewSet(b, b.clock, cluster.Config{FailoverTimeout: DefaultFailoverTimeout})
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
