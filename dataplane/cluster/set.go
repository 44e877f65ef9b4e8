package cluster

import (
	"iter"
	"log/slog"
	"slices"
	"time"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/dataplane/outlier"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// Host is the transport's side of a Set: its lock, its connections, its
// security and DNS, its log. The Set calls every method but Do and
// StartDNS under the owner's lock.
type Host interface {
	// Dialer makes the connections of the Set's endpoint pool.
	endpoint.Dialer
	// Do runs f under the owner's lock, unless the owner is closed, then
	// applies what f changed (Settle, publishing, Finish) before it
	// unlocks. The Set's timers and its waking of idle clusters call it,
	// with no lock held.
	Do(f func())
	// Security returns what a leaf's connections are secured with (nil:
	// the transport's default), for Endpoint; an error means the leaf's
	// TLS cannot be honoured, and the leaf gets no endpoints, so that its
	// requests fail rather than go out unprotected.
	Security(leaf *watchers.ClusterConfig) (any, error)
	// Endpoint returns the pool's endpoint for spec (pool.Get, with the
	// transport's key part and Tag).
	Endpoint(pool *endpoint.Pool, spec EndpointSpec) *endpoint.Endpoint
	// StartDNS starts the resolver of res, with no lock held; the host
	// attaches it (Set.Attach) and reports with Set.Resolved, under its
	// lock.
	StartDNS(res *Resolution)
	// Log logs, under the owner's lock: the host queues the line for when
	// it is released (a log handler is the user's code).
	Log(level slog.Level, msg string, args ...any)
	// Pinned reports whether the host keeps the named cluster awake
	// (grpcxds: an RLS child routes to it): it never starts idle, and an
	// idle sweep spares it.
	Pinned(name string) bool
	// HeaderHash hashes a request by one of its headers (ring_hash's
	// request_hash_header, gRFC A76): req is what the transport gave
	// Picker.Pick.
	HeaderHash(req any, name string) uint64
}

// EndpointSpec is an endpoint a leaf cluster lists, for Host.Endpoint.
type EndpointSpec struct {
	// Addrs are its addresses, as EDS (or DNS) gave them.
	Addrs []string
	// Proxy is the HTTP CONNECT proxy to reach them through (gRFC A86's
	// http_11_proxy), "" for none.
	Proxy string
	// Hostname is the EDS endpoint's, sent as SNI when the security says
	// auto_host_sni.
	Hostname string
	// Security is what Host.Security returned for the leaf.
	Security any
	// DNS is the resolution the addresses came from (LOGICAL_DNS), asked
	// to resolve again when the endpoint fails; nil for EDS.
	DNS *Resolution
	// Leaf is the leaf cluster that lists the endpoint, and Locality the
	// EDS locality it lists it in (zero for LOGICAL_DNS): the labels of a
	// connection's metrics (gRFC A94's grpc.lb.backend_service and
	// grpc.lb.locality), for the transport to keep or ignore. An endpoint
	// several leaves or localities list is asked for under each.
	Leaf     string
	Locality resources.LocalityID
}

// Config is how a Set's clusters behave.
type Config struct {
	// FailoverTimeout is how long a priority may stay connecting before
	// the next one is tried (gRFC A56).
	FailoverTimeout time.Duration
	// ConnectOnFirstRPC leaves clusters idle until a request picks them;
	// with ClusterIdleTimeout, one unused that long goes idle again
	// (idle.go).
	ConnectOnFirstRPC  bool
	ClusterIdleTimeout time.Duration
	// OutlierMetrics, if not nil, hears of the outliers the clusters'
	// outlier detection finds (gRFC A91), each as an outlier of its leaf
	// cluster. Detectors made before a Configure keep what they had.
	OutlierMetrics outlier.Metrics
	// HTTPOutlierDetection reads the clusters' outlier_detection as
	// Envoy does for HTTP (outlier.ConfigOfHTTP: with consecutive_5xx
	// and consecutive_gateway_failure), not as gRFC A50 does.
	HTTPOutlierDetection bool
	// ConnectionLimits has the leaves' max_pending_requests and
	// max_connections enforced (limits.go): the transport's endpoint
	// connections are pools whose requests may wait for a connection
	// (PendingConn), and which take their places under the leaf's
	// Limits (Result.Limits). gRPC has none.
	ConnectionLimits bool
	// StartOnSend has the transport say when a picked request leaves
	// for its endpoint (Done.Started) and end one that never did with
	// Done.Unsent: LRS counts a request issued and in progress from then,
	// not from the pick. Envoy counts a request issued (its host's
	// rq_total, LRS's total_issued_requests) once its connection pool
	// attaches it to a connection, so an HTTP request that waits for a
	// connection and is cancelled, or that the transport refuses to send,
	// was never issued. Without it the pick is the start: gRPC creates
	// the RPC's stream on the SubConn it picked, and grpc-go's load
	// reports count the RPC from its pick.
	StartOnSend bool
}

// Set holds the clusters of one channel (or client): every cluster its
// routes send to, over one endpoint pool. The owner gives it snapshots
// (Update), and after each event Settle chooses the priority and picker
// of each cluster that changed; the owner publishes Pickers and State.
// Guarded by the owner's lock, but for what pickers do.
type Set struct {
	host   Host
	clock  lbpolicy.Clock
	cfg    Config
	closed bool
	// headerHash is host.HeaderHash, made once for the pickers.
	headerHash func(req any, name string) uint64
	// snap is the snapshot in force, nil for none.
	snap *watchers.Snapshot
	// clusters are the clusters routes send to, by name.
	clusters map[string]*Cluster
	// pool holds the endpoints of those clusters, by address list and
	// security: one connection each, however many clusters and
	// priorities share it.
	pool *endpoint.Pool
	// dns are the LOGICAL_DNS resolutions, by host:port.
	dns      map[string]*Resolution
	counters counters
	// aggUsers are the aggregate clusters, by the name of each of their
	// leaves: a leaf that changes has them rebuilt.
	aggUsers map[string]map[*Cluster]struct{}
	// client is the goxds client load is reported with, and loads the
	// load stores held from it, by server key (load.go).
	client *client.Client
	loads  map[string]*heldStore
	// dirty are the clusters whose priority and picker must be chosen
	// again.
	dirty map[*Cluster]struct{}
	out   published
	// failover holds the failover deadlines of the clusters (failover.go);
	// idleSweep the timer of the idle sweep (idle.go).
	failover  failoverQueue
	idleSweep lbpolicy.Timer
	// pruneConns: some endpoint may have lost its last cluster, so Finish
	// has the pool shut down the orphans (and forgets load stores no
	// cluster holds).
	pruneConns bool
	waker      waker
}

// published is what the owner publishes: the cluster pickers of the
// route picker last published, and changes what changed since (nil: a
// cluster gone), so that the next costs the changes, not the clusters;
// and how many clusters are in each state, for the channel's state.
type published struct {
	pickers                 PickerMap
	changes                 map[string]Picker
	ready, connecting, idle int
}

// NewSet returns an empty Set whose transport is host; its timers run on
// clock (nil: the real one).
func NewSet(host Host, clock lbpolicy.Clock, cfg Config) *Set {
	if clock == nil {
		clock = lbpolicy.RealClock{}
	}
	s := &Set{
		host:     host,
		clock:    clock,
		cfg:      cfg,
		clusters: make(map[string]*Cluster),
		dns:      make(map[string]*Resolution),
		counters: counters{
			inflight: make(map[string]*leafCounter),
			refs:     make(map[string]int),
			stale:    make(map[string]struct{}),
		},
		aggUsers: make(map[string]map[*Cluster]struct{}),
		loads:    make(map[string]*heldStore),
		dirty:    make(map[*Cluster]struct{}),
		out:      published{changes: make(map[string]Picker)},
	}
	s.headerHash = host.HeaderHash
	s.pool = endpoint.NewPool(host, s.endpointChanged)
	return s
}

// Pool is the Set's endpoint pool, for the transport to report its
// connections' states (Pool.SetState) and have idle ones connect.
func (s *Set) Pool() *endpoint.Pool { return s.pool }

// Configure sets how the clusters behave from now on. Turning
// ConnectOnFirstRPC off wakes the idle clusters.
func (s *Set) Configure(cfg Config) {
	s.cfg.FailoverTimeout = cfg.FailoverTimeout
	if s.cfg.ConnectOnFirstRPC && !cfg.ConnectOnFirstRPC {
		for _, cl := range s.clusters {
			s.wakeLocked(cl)
		}
	}
	s.cfg = cfg
}

// SetClient sets the goxds client whose load stores lrs_server self
// reports to (nil: none; such clusters are logged, and report nothing).
func (s *Set) SetClient(c *client.Client) { s.client = c }

// RouteClusters returns the clusters the routes of vh can send to (the
// roots of Update): each forwarding route's cluster and weighted
// clusters. Routes that do not forward (redirects, direct responses) name
// none, nor do routes by a cluster specifier plugin, whose clusters the
// host adds itself (Set.Add). A nil vh has none.
func RouteClusters(vh *resources.VirtualHost) map[string]struct{} {
	out := make(map[string]struct{})
	if vh == nil {
		return out
	}
	for _, r := range vh.Routes {
		if r.Action != resources.RouteActionRoute {
			continue
		}
		if r.Cluster != "" {
			out[r.Cluster] = struct{}{}
		}
		for _, wc := range r.WeightedClusters {
			out[wc.Name] = struct{}{}
		}
	}
	return out
}

// Update applies snap. With roots nil, the clusters stay those of the
// last Update, and only those whose ClusterConfig changed since, and the
// aggregates above them, are looked at: the usual update (one cluster's
// endpoints) costs that cluster, not every cluster. Otherwise the Set's
// clusters become roots: those not in it are dropped, new ones made
// (idle, with ConnectOnFirstRPC, unless pinned).
func (s *Set) Update(snap *watchers.Snapshot, roots map[string]struct{}) {
	prev := s.snap
	s.snap = snap
	if roots == nil && prev != nil {
		s.refreshChangedLocked(snap.Clusters.Changes(prev.Clusters))
	} else {
		for name, cl := range s.clusters {
			if _, ok := roots[name]; !ok {
				s.dropClusterLocked(cl)
			}
		}
		for name := range roots {
			cl := s.clusters[name]
			if cl == nil {
				cl = newCluster(name)
				cl.idle = s.cfg.ConnectOnFirstRPC && !s.host.Pinned(name)
				s.clusters[name] = cl
			}
			s.refreshClusterLocked(cl, false)
		}
	}
	s.pruneCountersLocked()
}

// refreshChangedLocked rebuilds the clusters of the given names, and the
// aggregate clusters they are leaves of.
func (s *Set) refreshChangedLocked(names iter.Seq[string]) {
	var aggs []*Cluster
	for name := range names {
		if cl := s.clusters[name]; cl != nil {
			s.refreshClusterLocked(cl, false)
		}
		for cl := range s.aggUsers[name] {
			aggs = append(aggs, cl)
		}
	}
	// After the walk: refreshing an aggregate edits aggUsers. One listed
	// twice, or refreshed above, finds its inputs unchanged the second time.
	for _, cl := range aggs {
		if s.clusters[cl.name] == cl {
			s.refreshClusterLocked(cl, false)
		}
	}
}

// Clear forgets the snapshot and every cluster; the next snapshot's
// pickers are built whole.
func (s *Set) Clear() {
	s.snap = nil
	for _, cl := range s.clusters {
		s.dropClusterLocked(cl)
	}
	s.pruneCountersLocked()
}

// Add makes the named cluster one of the Set's, awake, as a root of the
// snapshot in force, which has it; one it has already is woken. For a
// cluster the host routes to besides the routes (grpcxds: an RLS
// target).
func (s *Set) Add(name string) {
	if cl := s.clusters[name]; cl != nil {
		s.wakeLocked(cl) // a route's cluster, idle until now
		return
	}
	cl := newCluster(name)
	s.clusters[name] = cl
	s.refreshClusterLocked(cl, false)
}

// Remove drops the named cluster, if the Set has it.
func (s *Set) Remove(name string) {
	if cl := s.clusters[name]; cl != nil {
		s.dropClusterLocked(cl)
	}
}

// ClusterState returns the state of the named cluster, and false if the
// Set has no such cluster.
func (s *Set) ClusterState(name string) (endpoint.State, bool) {
	cl := s.clusters[name]
	if cl == nil {
		return 0, false
	}
	return cl.state, true
}

// Settle chooses the priority and picker of every cluster that changed,
// and reports whether the owner must publish: some cluster's picker is
// new.
func (s *Set) Settle() bool {
	picked := 0
	for len(s.dirty) > 0 {
		for cl := range s.dirty {
			picked++
			delete(s.dirty, cl)
			s.uncountLocked(cl)
			s.pickPriorityLocked(cl)
			s.markUsedLocked(cl)
			s.countLocked(cl)
			s.out.changes[cl.name] = cl.picker
		}
	}
	if picked > smallMap {
		// A Go map keeps its size once grown, and ranging over it costs
		// that size, empty or not: a map that once held every cluster (the
		// first configuration) made every later event cost O(clusters).
		s.dirty = make(map[*Cluster]struct{})
	}
	// The clusters told of a lost connection have chosen again what they
	// want: what they still want connects again.
	s.pool.Reconnect()
	return picked > 0
}

// Pickers returns the map of the clusters' pickers, for the owner to
// publish: the last one with the changes since applied, copying only the
// shards they fall in. Empty without a snapshot.
func (s *Set) Pickers() PickerMap {
	o := &s.out
	if s.snap == nil {
		o.pickers = PickerMap{}
		clear(o.changes)
		return o.pickers
	}
	if len(o.changes) > 0 || o.pickers.Len() != len(s.clusters) {
		if len(o.changes) > len(s.clusters)/4 || !o.pickers.balanced(len(s.clusters)) {
			o.pickers = newPickerMap(s.clusters)
		} else {
			o.pickers = o.pickers.with(o.changes)
		}
		if len(o.changes) > smallMap {
			o.changes = make(map[string]Picker) // see Settle
		} else {
			clear(o.changes)
		}
	}
	return o.pickers
}

// State is the state of the Set as a whole: Ready if a cluster is,
// else Connecting if one is, else Idle if one is, else TransientFailure.
func (s *Set) State() endpoint.State {
	switch o := &s.out; {
	case o.ready > 0:
		return endpoint.Ready
	case o.connecting > 0:
		return endpoint.Connecting
	case o.idle > 0:
		return endpoint.Idle
	}
	return endpoint.TransientFailure
}

// smallMap is the size up to which a map emptied is kept for reuse, and
// beyond which it is made anew.
const smallMap = 64

// Deferred is what the owner does once its lock is released: close the
// resolvers no cluster uses, start the new ones, and let go of the load
// stores no cluster reports to (the last release of a server waits for
// its LRS stream's goroutines).
type Deferred struct {
	host     Host
	start    []*Resolution
	stop     []Resolver
	releases []func()
}

// Run does it, with no lock held.
func (d Deferred) Run() {
	for _, r := range d.stop {
		r.Close()
	}
	for _, w := range d.start {
		d.host.StartDNS(w)
	}
	for _, release := range d.releases {
		release()
	}
}

// Finish, after the owner published, shuts down the connections no
// cluster uses any more (no picker in force hands them out) and returns
// what is to be done once the lock is released.
func (s *Set) Finish() Deferred {
	d := Deferred{host: s.host}
	if s.pruneConns {
		s.pruneConns = false
		s.pool.Prune()
		d.releases = s.pruneLoadsLocked()
	}
	d.start, d.stop = s.dnsChangesLocked()
	return d
}

// Close stops every timer and connection of the Set, and returns what to
// do once the owner's lock is released (then StopWaking).
func (s *Set) Close() Deferred {
	s.closed = true
	for _, cl := range s.clusters {
		cl.stopTimer()
		cl.stopOutliers()
	}
	s.stopFailoversLocked()
	s.stopIdleSweepLocked()
	s.pool.Close()
	d := Deferred{host: s.host}
	for _, h := range s.loads {
		d.releases = append(d.releases, h.release)
	}
	s.loads = nil
	for _, w := range s.dns {
		w.stopped = true
		if w.r != nil {
			d.stop = append(d.stop, w.r)
		}
	}
	s.clusters, s.dns = nil, nil
	return d
}

// countLocked counts cl in the state it is in, for the Set's state.
func (s *Set) countLocked(cl *Cluster) {
	cl.counted = cl.state
	switch cl.state {
	case endpoint.Ready:
		s.out.ready++
	case endpoint.Connecting:
		s.out.connecting++
	case endpoint.Idle:
		s.out.idle++
	}
}

// uncountLocked undoes countLocked.
func (s *Set) uncountLocked(cl *Cluster) {
	switch cl.counted {
	case endpoint.Ready:
		s.out.ready--
	case endpoint.Connecting:
		s.out.connecting--
	case endpoint.Idle:
		s.out.idle--
	}
	cl.counted = notCounted
}

// endpointChanged is the pool's changed: the cluster (the user, a
// *Cluster) chooses its priority and picker again.
func (s *Set) endpointChanged(u endpoint.User, _ *endpoint.Endpoint) {
	s.dirty[u.(*Cluster)] = struct{}{}
}

// repickLocked returns the function that a timer of cl's priority p
// calls to have cl's picker built again: it runs f, then rebuilds, under
// the owner's lock. A timer of a priority rebuilt since (an update, the
// cluster dropped or put to sleep) does nothing: the leaf cannot stop
// its timer (pick_first's turn), so its end is ignored here, rather than
// costing a picker published for nothing.
func (s *Set) repickLocked(cl *Cluster, p *priority) func(f func()) {
	return func(f func()) {
		s.host.Do(func() {
			if s.closed || s.clusters[cl.name] != cl || !slices.Contains(cl.prios, p) {
				return
			}
			f()
			s.dirty[cl] = struct{}{}
		})
	}
}
