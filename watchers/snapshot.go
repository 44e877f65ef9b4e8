package watchers

import (
	"slices"

	"github.com/goxds/xds/resources"
)

// Snapshot is one complete, consistent state of a config tree: every part
// is resolved or known to be in error. It is immutable and shared: neither
// the library nor its users may modify it or anything it points to.
type Snapshot struct {
	// Listener is the root of the tree.
	Listener *resources.Listener
	// RouteConfig is the listener's route configuration: the RDS resource
	// it names, or its InlineRouteConfig.
	RouteConfig *resources.RouteConfig
	// VirtualHost is the virtual host of RouteConfig chosen for
	// TreeOptions.Authority. Its routes are what requests are matched
	// against; routes whose action is not RouteActionRoute name no cluster.
	VirtualHost *resources.VirtualHost
	// Clusters holds, by name, every cluster a route of VirtualHost can
	// send to (each branch of weighted clusters included) and, below
	// aggregate clusters, every cluster they lead to within
	// MaxAggregateDepth. A cluster that
	// cannot be used is here too, with its Err set: a key is never missing
	// for a cluster a route names. A ClusterConfig that did not change is
	// the same pointer in the next snapshot, so consumers can skip work by
	// comparing pointers.
	Clusters ClusterMap
}

// ClusterConfig is one cluster of a Snapshot, resolved: for an EDS cluster
// its endpoints, for a LOGICAL_DNS cluster its address, for an aggregate
// cluster its leaf clusters in priority order.
type ClusterConfig struct {
	// Name is the cluster's name, its key in Snapshot.Clusters.
	Name string
	// Cluster is the resource; nil when the cluster itself could not be
	// had (Err says why).
	Cluster *resources.Cluster
	// Endpoints are an EDS cluster's endpoints, fetched under
	// Cluster.EDSServiceName(), each LbEndpointCollection its localities
	// name (gRFC A95) in place; nil when they could not be had (Err says
	// why) and for the other kinds.
	Endpoints *resources.Endpoints
	// DNSAddress is a LOGICAL_DNS cluster's "host:port", to be resolved by
	// the consumer.
	DNSAddress string
	// Leaves are an aggregate cluster's leaf clusters (EDS, LOGICAL_DNS, or
	// clusters in error whose kind is unknown), depth first in priority
	// order, each once. Each is also a key of Snapshot.Clusters, with its
	// own Err if it cannot be used; consumers fail over past those.
	Leaves []string
	// Err says why the cluster cannot be used, nil if it can. It wraps the
	// client's error for the cluster or its endpoints (errors.Is with
	// client.ErrResourceNotFound, client.ErrResourceInvalid,
	// client.ErrServerUnavailable), or ErrAggregateCycle or
	// ErrAggregateTooDeep. Cluster may still be set, e.g. for an EDS
	// cluster whose endpoints do not exist.
	Err error
}

// sameAs reports whether cc and o say the same thing, so that o, the
// pointer the consumer already has, can stand for cc. Resources are
// compared by pointer, which the client changes only when a resource
// really changed, and errors by text: the client makes a new error value
// for every notification, even when nothing new happened.
func (cc *ClusterConfig) sameAs(o *ClusterConfig) bool {
	return cc.Name == o.Name &&
		cc.Cluster == o.Cluster &&
		cc.Endpoints == o.Endpoints &&
		cc.DNSAddress == o.DNSAddress &&
		slices.Equal(cc.Leaves, o.Leaves) &&
		errText(cc.Err) == errText(o.Err)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// newSnapshot returns the snapshot made of the given parts, or nil if it
// would say nothing prev does not. ClusterConfigs equal to prev's are
// replaced by prev's, in clusters itself, which the snapshot's ClusterMap
// is then made of.
func newSnapshot(prev *Snapshot, l *resources.Listener, rc *resources.RouteConfig, vh *resources.VirtualHost, clusters map[string]*ClusterConfig) *Snapshot {
	changed := prev == nil || prev.Listener != l || prev.RouteConfig != rc ||
		prev.VirtualHost != vh || prev.Clusters.Len() != len(clusters)
	for name, cc := range clusters {
		var old *ClusterConfig
		if prev != nil {
			old = prev.Clusters.Get(name)
		}
		if old != nil && cc.sameAs(old) {
			clusters[name] = old
			continue
		}
		changed = true
	}
	if !changed {
		return nil
	}
	return &Snapshot{Listener: l, RouteConfig: rc, VirtualHost: vh, Clusters: NewClusterMap(clusters)}
}
