package client

import (
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/goxds/xds/resources"
)

// LoadStore holds the load of the clusters that report to one LRS server:
// for each cluster and EDS service name, the RPCs of each locality and the
// requests dropped. Whoever sends RPCs records them here; the client's LRS
// stream takes a report at each load_reporting_interval the server asked
// for. Get one with [Client.ReportLoad]. It is safe for concurrent use.
//
// Recording is cheap: a ClusterLoad and a LocalityLoad are looked up once
// (when a picker is built, say) and each RPC then costs a few atomic adds,
// with no lock shared between RPCs.
type LoadStore struct {
	clock Clock // read-only

	mu       sync.Mutex
	clusters map[clusterKey]*ClusterLoad // guarded by mu; entries are never removed while the store lives
}

// clusterKey names the load of one cluster: reports are per cluster and
// per EDS service name (cluster_service_name).
type clusterKey struct{ cluster, service string }

func newLoadStore(clock Clock) *LoadStore {
	return &LoadStore{clock: clock, clusters: make(map[clusterKey]*ClusterLoad)}
}

// Cluster returns the load of cluster, whose endpoints come from the EDS
// service edsServiceName (the Cluster's eds_cluster_config.service_name
// as received; "" when unset or not an EDS cluster). The same arguments
// return the same ClusterLoad.
func (s *LoadStore) Cluster(cluster, edsServiceName string) *ClusterLoad {
	k := clusterKey{cluster, edsServiceName}
	s.mu.Lock()
	defer s.mu.Unlock()
	cl := s.clusters[k]
	if cl == nil {
		cl = &ClusterLoad{key: k, localities: make(map[resources.LocalityID]*LocalityLoad), lastReport: s.clock.Now()}
		s.clusters[k] = cl
	}
	return cl
}

// ClusterLoad is the load of one cluster and EDS service name.
type ClusterLoad struct {
	key clusterKey // read-only

	mu         sync.Mutex
	localities map[resources.LocalityID]*LocalityLoad // guarded by mu
	lastReport time.Time                              // start of the current interval; guarded by mu

	drops sync.Map // category ("" for uncategorized) to *atomic.Uint64; lock-free once a category is known
}

// Locality returns the load of one locality of the cluster. The same
// locality returns the same LocalityLoad, so callers may keep it.
func (c *ClusterLoad) Locality(id resources.LocalityID) *LocalityLoad {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.localities[id]
	if l == nil {
		l = &LocalityLoad{}
		c.localities[id] = l
	}
	return l
}

// CallDropped records a request dropped before it was sent. category is
// the drop_overload category that dropped it, or "" for a drop with none
// (a circuit breaker's): such drops count in total_dropped_requests only,
// as gRPC reports them.
func (c *ClusterLoad) CallDropped(category string) {
	n, ok := c.drops.Load(category)
	if !ok {
		n, _ = c.drops.LoadOrStore(category, new(atomic.Uint64))
	}
	n.(*atomic.Uint64).Add(1)
}

// LocalityLoad counts the RPCs sent to one locality of a cluster, and sums
// the backend metrics their ends carried.
type LocalityLoad struct {
	inProgress atomic.Int64
	issued     atomic.Uint64
	succeeded  atomic.Uint64
	errored    atomic.Uint64
	metrics    sync.Map // metric name to *metricSum
}

// metricSum is one backend metric of a locality over an interval.
type metricSum struct {
	mu    sync.Mutex
	count uint64  // guarded by mu
	sum   float64 // guarded by mu
}

// Backend metric names that LRS reports in fields of their own, as gRPC
// names them; any other name goes in load_metric_stats.
const (
	metricCPU = "cpu_utilization"
	metricMem = "mem_utilization"
	metricApp = "application_utilization"
)

// CallStarted records an RPC sent to an endpoint of the locality. Each call
// must be followed by one CallFinished.
func (l *LocalityLoad) CallStarted() {
	l.issued.Add(1)
	l.inProgress.Add(1)
}

// CallFinished records the end of an RPC that CallStarted recorded: failed
// is whether it ended with an error (any status but OK).
func (l *LocalityLoad) CallFinished(failed bool) {
	l.inProgress.Add(-1)
	if failed {
		l.errored.Add(1)
	} else {
		l.succeeded.Add(1)
	}
}

// CallCancelled records the end of an RPC that CallStarted recorded,
// which its caller cancelled before it ended: it stays counted as issued,
// but neither as succeeded nor as errored. An HTTP transport ends so a
// request whose caller went away, as Envoy's load reports count it: its
// router charges an upstream host an error only for a 5xx it got or made
// itself, and a downstream reset makes none. gRPC counts a cancelled RPC
// as any other status but OK (CallFinished(true)).
func (l *LocalityLoad) CallCancelled() {
	l.inProgress.Add(-1)
}

// CallUnstarted takes back a CallStarted whose RPC was not sent after all:
// the transport held it, to be picked again (gRFC A105's connection
// scaling: every connection of the endpoint picked was full, and another
// is being made). Issued is taken back unless a report already carried it.
func (l *LocalityLoad) CallUnstarted() {
	l.inProgress.Add(-1)
	for {
		n := l.issued.Load()
		if n == 0 || l.issued.CompareAndSwap(n, n-1) {
			return
		}
	}
}

// CallServerLoad records one value of a backend metric that an RPC of the
// locality reported as it ended (an ORCA load report, gRFC A64). The
// report carries, per metric, how many RPCs reported it and the sum of
// their values. cpu_utilization, mem_utilization and
// application_utilization go in the fields LRS has for them; other names
// in load_metric_stats, as given (gRPC names an ORCA named metric
// "named_metrics.<name>").
func (l *LocalityLoad) CallServerLoad(name string, value float64) {
	m, ok := l.metrics.Load(name)
	if !ok {
		m, _ = l.metrics.LoadOrStore(name, new(metricSum))
	}
	ms := m.(*metricSum)
	ms.mu.Lock()
	ms.count++
	ms.sum += value
	ms.mu.Unlock()
}

// takeMetrics puts the metrics of the interval in ls and starts a new one.
func (l *LocalityLoad) takeMetrics(ls *endpointv3.UpstreamLocalityStats) {
	l.metrics.Range(func(k, v any) bool {
		ms := v.(*metricSum)
		ms.mu.Lock()
		count, sum := ms.count, ms.sum
		ms.count, ms.sum = 0, 0
		ms.mu.Unlock()
		if count == 0 {
			return true
		}
		unnamed := &endpointv3.UnnamedEndpointLoadMetricStats{NumRequestsFinishedWithMetric: count, TotalMetricValue: sum}
		switch name := k.(string); name {
		case metricCPU:
			ls.CpuUtilization = unnamed
		case metricMem:
			ls.MemUtilization = unnamed
		case metricApp:
			ls.ApplicationUtilization = unnamed
		default:
			ls.LoadMetricStats = append(ls.LoadMetricStats, &endpointv3.EndpointLoadMetricStats{
				MetricName: name, NumRequestsFinishedWithMetric: count, TotalMetricValue: sum})
		}
		return true
	})
}

// LoadStats returns the load of the clusters named (all of them when all
// is set) since the previous call, and starts a new interval: every count
// but the RPCs in progress starts again from zero. A cluster with nothing
// to report is left out, and so is a locality with no RPC counted and none
// in progress. It implements transport.LoadSource.
func (s *LoadStore) LoadStats(clusters []string, all bool) []*endpointv3.ClusterStats {
	want := make(map[string]bool, len(clusters))
	for _, c := range clusters {
		want[c] = true
	}
	s.mu.Lock()
	var cls []*ClusterLoad
	for k, cl := range s.clusters {
		if all || want[k.cluster] {
			cls = append(cls, cl)
		}
	}
	s.mu.Unlock()
	now := s.clock.Now()
	var out []*endpointv3.ClusterStats
	for _, cl := range cls {
		if cs := cl.stats(now); cs != nil {
			out = append(out, cs)
		}
	}
	return out
}

// stats is the report of c for the interval ending now, nil if empty.
func (c *ClusterLoad) stats(now time.Time) *endpointv3.ClusterStats {
	cs := &endpointv3.ClusterStats{ClusterName: c.key.cluster, ClusterServiceName: c.key.service}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drops.Range(func(cat, n any) bool {
		d := n.(*atomic.Uint64).Swap(0)
		if d == 0 {
			return true
		}
		cs.TotalDroppedRequests += d
		if cat != "" {
			cs.DroppedRequests = append(cs.DroppedRequests, &endpointv3.ClusterStats_DroppedRequests{Category: cat.(string), DroppedCount: d})
		}
		return true
	})
	for id, l := range c.localities {
		// In progress is read before the counts are taken: an RPC that
		// finishes in between is then counted as finished and maybe as in
		// progress too, never as neither.
		inProgress := l.inProgress.Load()
		ls := &endpointv3.UpstreamLocalityStats{
			Locality:                &corev3.Locality{Region: id.Region, Zone: id.Zone, SubZone: id.SubZone},
			TotalIssuedRequests:     l.issued.Swap(0),
			TotalSuccessfulRequests: l.succeeded.Swap(0),
			TotalErrorRequests:      l.errored.Swap(0),
			TotalRequestsInProgress: uint64(max(inProgress, 0)),
		}
		l.takeMetrics(ls)
		if ls.TotalIssuedRequests == 0 && ls.TotalSuccessfulRequests == 0 && ls.TotalErrorRequests == 0 && ls.TotalRequestsInProgress == 0 &&
			ls.CpuUtilization == nil && ls.MemUtilization == nil && ls.ApplicationUtilization == nil && len(ls.LoadMetricStats) == 0 {
			continue
		}
		cs.UpstreamLocalityStats = append(cs.UpstreamLocalityStats, ls)
	}
	cs.LoadReportInterval = durationpb.New(now.Sub(c.lastReport))
	c.lastReport = now
	if cs.TotalDroppedRequests == 0 && len(cs.UpstreamLocalityStats) == 0 {
		return nil
	}
	return cs
}
