package cluster

import (
	"log/slog"
	"strings"
	"sync/atomic"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// Load reporting (gRFC A27's LRS): a leaf cluster whose lrs_server is
// self records its requests in the client's LoadStore of the management
// server it came from (the Cluster's LRSServer, as the client decoded
// it: after a fallback, the server that sent it); the client's LRS stream
// sends the reports. The Set holds one store per server while some
// priority in use reports to it: addLeafLocked gets it, Finish releases
// those no priority uses. Pickers record: a drop or a circuit breaker
// refusal at the pick, and a request handed to an endpoint as started in
// the endpoint's locality (at the pick, or with Config.StartOnSend when
// the transport says it left: Done.Started), then as succeeded or errored
// at Done.Finish; one that never left (Done.Unsent) is not recorded.

// counters are the in-flight counts of the leaf clusters, for their
// circuit breakers; they outlive pickers. refs counts the clusters whose
// priorities hold each (Cluster.held), and stale are the leaves whose
// count fell to zero, forgotten at the end of the update unless some
// cluster took them again.
type counters struct {
	inflight map[string]*leafCounter
	refs     map[string]int
	stale    map[string]struct{}
}

// heldStore is a LoadStore the Set holds, and how to let it go; refs
// counts the clusters whose priorities report to it (Cluster.held).
type heldStore struct {
	store   *client.LoadStore
	release func()
	refs    int
}

// lrsServerOf returns the management server a cluster came from, to which
// lrs_server self reports: the first server of the authority of an
// xdstp:// name, else the first top-level server. (After a fallback, the
// cluster came from a later server; the load still goes to the first, the
// server the configuration means.)
func lrsServerOf(cfg *bootstrap.Config, cluster string) (bootstrap.ServerConfig, bool) {
	servers := cfg.Servers
	if rest, ok := strings.CutPrefix(cluster, "xdstp://"); ok {
		authority, _, _ := strings.Cut(rest, "/")
		if s, ok := cfg.ServersForAuthority(authority); ok {
			servers = s
		}
	}
	if len(servers) == 0 {
		return bootstrap.ServerConfig{}, false
	}
	return servers[0], true
}

// loadLocked returns the ClusterLoad a leaf's RPCs are recorded in, and
// the key of the server it reports to; nil if the leaf reports no load or
// its store cannot be had (logged).
func (s *Set) loadLocked(leaf *watchers.ClusterConfig) (*client.ClusterLoad, string) {
	c := leaf.Cluster
	if !c.LRSServerSelf || s.closed {
		return nil, ""
	}
	if s.client == nil {
		s.host.Log(slog.LevelWarn, "cluster reports load to its management server, but the channel has no goxds client to report with", "cluster", leaf.Name)
		return nil, ""
	}
	// The server that sent the cluster, as the client decoded it (a
	// fallback's after a fallback); failing that, the first the client's
	// bootstrap lists for the cluster's authority.
	server, ok := bootstrap.ServerConfig{}, c.LRSServer != nil
	if ok {
		server = *c.LRSServer
	} else if server, ok = lrsServerOf(s.client.Bootstrap(), leaf.Name); !ok {
		return nil, ""
	}
	key := server.Key()
	h := s.loads[key]
	if h == nil {
		store, release, err := s.client.ReportLoad(server)
		if err != nil {
			s.host.Log(slog.LevelWarn, "cannot report the load of a cluster", "cluster", leaf.Name, "err", err)
			return nil, ""
		}
		h = &heldStore{store: store, release: release}
		s.loads[key] = h
	}
	return h.store.Cluster(leaf.Name, c.ServiceName), key
}

// lrsMetrics is which backend metrics reported at the end of RPCs (ORCA)
// a cluster's load reports carry: its lrs_report_endpoint_metrics, read as
// gRPC reads them (gRFC A85). Without the field, none.
type lrsMetrics struct {
	cpu, mem, app bool
	allNamed      bool            // named_metrics.*
	named         map[string]bool // named_metrics.<name>
}

// lrsMetricsOf returns c's lrsMetrics, nil if it reports no metric.
func lrsMetricsOf(c *resources.Cluster) *lrsMetrics {
	names := c.LRSReportEndpointMetrics
	if len(names) == 0 {
		return nil
	}
	m := &lrsMetrics{named: make(map[string]bool)}
	for _, n := range names {
		switch n {
		case "cpu_utilization":
			m.cpu = true
		case "mem_utilization":
			m.mem = true
		case "application_utilization":
			m.app = true
		case "named_metrics.*":
			m.allNamed = true
		default:
			// Names of any other form are not metrics gRPC knows.
			if name, ok := strings.CutPrefix(n, "named_metrics."); ok && name != "" {
				m.named[name] = true
			}
		}
	}
	return m
}

// record adds the metrics of r that m selects to ll.
func (m *lrsMetrics) record(ll *client.LocalityLoad, r *v3orcapb.OrcaLoadReport) {
	if m.cpu {
		ll.CallServerLoad("cpu_utilization", r.CpuUtilization)
	}
	if m.mem {
		ll.CallServerLoad("mem_utilization", r.MemUtilization)
	}
	if m.app {
		ll.CallServerLoad("application_utilization", r.ApplicationUtilization)
	}
	for name, v := range r.NamedMetrics {
		if m.allNamed || m.named[name] {
			ll.CallServerLoad("named_metrics."+name, v)
		}
	}
}

// pruneLoadsLocked lets go of the stores no priority reports to, and
// returns their releases, to call once the owner's lock is released: the
// last release of a server stops its LRS stream and waits for its
// goroutines.
func (s *Set) pruneLoadsLocked() []func() {
	var out []func()
	for key, h := range s.loads { // one per LRS server
		if h.refs <= 0 {
			out = append(out, h.release)
			delete(s.loads, key)
		}
	}
	return out
}

// localityLoads returns the LocalityLoad of each endpoint of p for its
// picker; nil if p reports no load.
func (p *priority) localityLoads() map[*endpoint.Endpoint]*client.LocalityLoad {
	if p.load == nil {
		return nil
	}
	out := make(map[*endpoint.Endpoint]*client.LocalityLoad)
	for _, l := range p.lb.Localities {
		ll := p.load.Locality(l.ID)
		for _, e := range l.Endpoints {
			if e.Endpoint.Conn() != nil {
				out[e.Endpoint] = ll
			}
		}
	}
	return out
}

// leafCounter is a leaf cluster's in-flight count (max_requests) and,
// with Config.ConnectionLimits, its connection limits. startOnSend is
// Config.StartOnSend, which the leaf's pickers read from here as they
// read the limits.
type leafCounter struct {
	atomic.Int64
	limits      *Limits
	startOnSend bool
}

// counterLocked returns the in-flight counter of a leaf cluster, held by
// cl until releaseLocked.
func (s *Set) counterLocked(cl *Cluster, leaf string) *leafCounter {
	c := s.counters.inflight[leaf]
	if c == nil {
		c = &leafCounter{startOnSend: s.cfg.StartOnSend}
		if s.cfg.ConnectionLimits {
			c.limits = &Limits{leaf: leaf}
		}
		s.counters.inflight[leaf] = c
	}
	s.counters.refs[leaf]++
	cl.held.counters = append(cl.held.counters, leaf)
	return c
}

// releaseLocked lets go of what a cluster's priorities held: counters
// and load stores, which the next prune forgets if no cluster holds them.
func (s *Set) releaseLocked(h heldRefs) {
	for _, leaf := range h.counters {
		if s.counters.refs[leaf]--; s.counters.refs[leaf] <= 0 {
			s.counters.stale[leaf] = struct{}{}
		}
	}
	for _, key := range h.loads {
		if s := s.loads[key]; s != nil {
			s.refs--
		}
	}
}

// pruneCountersLocked forgets the counters of leaves no cluster holds
// since the last prune; those held again are kept, with their count.
func (s *Set) pruneCountersLocked() {
	for leaf := range s.counters.stale {
		if s.counters.refs[leaf] <= 0 {
			delete(s.counters.inflight, leaf)
			delete(s.counters.refs, leaf)
		}
	}
	if len(s.counters.stale) > smallMap {
		s.counters.stale = make(map[string]struct{}) // see Settle
	} else {
		clear(s.counters.stale)
	}
}
