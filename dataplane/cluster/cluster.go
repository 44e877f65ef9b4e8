package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/dataplane/outlier"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// Cluster balances one cluster that routes send to. Its priorities are
// those of its endpoints, or for an aggregate cluster those of each leaf in
// turn (gRFC A37): the first leaf's priorities, then the second's, and so
// on. A LOGICAL_DNS leaf is one priority of one endpoint. Guarded by the
// owner's lock.
type Cluster struct {
	name string
	// inputs are the ClusterConfigs the priorities were built from: the
	// cluster's, then each leaf's. The snapshot keeps the pointer of an
	// unchanged ClusterConfig, so equal inputs mean nothing to rebuild.
	inputs []*watchers.ClusterConfig
	// dnsUsed are the DNS resolutions of its LOGICAL_DNS leaves.
	dnsUsed []*Resolution
	// held are the counters and load stores its priorities hold; aggLeaves
	// the leaves it is listed under in Set.aggUsers.
	held      heldRefs
	aggLeaves []string
	// prios are the priorities, highest first. err says why there are
	// none; leafErrs why leaves contribute none.
	prios    []*priority
	err      error
	leafErrs []string

	// Priority selection (pickPriorityLocked).
	// wanted are the endpoints of every priority tried, up to the one in
	// use: those the cluster keeps connected.
	wanted map[*endpoint.Endpoint]struct{}
	// scaled: see scale.go.
	scaled map[*endpoint.Endpoint]uint32
	// timedOut are the priorities whose failover timer fired while they
	// were connecting; a priority leaves it by becoming ready. Nil until
	// the first.
	timedOut map[int]bool
	// failSeq names cl's entry in the Set's failoverQueue: the
	// failover timer of priority timerPrio; 0 if none runs.
	failSeq   uint64
	timerPrio int
	// state and picker are the outcome, for the route picker. counted is
	// the state the Set counts cl in (countLocked), notCounted for none.
	state   endpoint.State
	picker  Picker
	counted endpoint.State
	// chosen is the priority in use, -1 for none usable, and notChosen
	// before the first choice: a change is logged.
	chosen int
	// idle: the cluster connects on its next RPC (idle.go). used: an RPC
	// picked it since the last idle sweep; set by pickers.
	idle bool
	used atomic.Bool
	// outliers are the outlier detectors of its priorities.
	outliers map[odKey]*outlier.Detector
}

// heldRefs are what a cluster's priorities hold of the Set's
// shared state, released when they are rebuilt: the in-flight counters of
// its leaves, by leaf name, and the load stores they report to, by server
// key. Counted, so that an update need not look at every cluster to know
// which are still in use.
type heldRefs struct {
	counters []string
	loads    []string
}

// notChosen is Cluster.chosen before the first choice of a priority.
const notChosen = -2

// notCounted is Cluster.counted while the Set counts it in no state.
const notCounted endpoint.State = 255

// priority is one priority of a cluster: localities with their healthy
// endpoints, and what the leaf cluster it comes from says about them.
type priority struct {
	leaf        string
	drops       []resources.DropOverload
	maxRequests uint32
	inflight    *leafCounter // the leaf's circuit breaker count and limits
	// load records the leaf's RPCs and drops for LRS (load.go), nil if it
	// reports none; lrsKey is the key of the server it reports to.
	load    *client.ClusterLoad
	lrsKey  string
	metrics *lrsMetrics // the backend metrics load carries, nil for none
	// lb is the leaf's policy over the priority's localities (lb.Policy
	// is the leaf's, shared: 104 B a priority otherwise): it picks the
	// endpoints. Its Before has what the leaves had before this update
	// (pick_first's choice, weighted_round_robin's weights); its Repick
	// has the cluster's picker built again for its timers (nil in tests),
	// which run on the Set's clock.
	lb lbpolicy.Leaf
	// pending: a DNS name not resolved yet; the priority counts as
	// connecting.
	pending bool
	// outlier is the leaf's outlier detection, nil if none; its
	// detector (attachOutliersLocked) is lb.Ejected, which od returns.
	// (One field for both: a pointer more took priority past a Go size
	// class, 16 B a priority.)
	outlier *outlier.Config
}

// od returns p's outlier detector, nil without outlier detection.
func (p *priority) od() *outlier.Detector {
	d, _ := p.lb.Ejected.(*outlier.Detector)
	return d
}

func newCluster(name string) *Cluster {
	return &Cluster{
		name:    name,
		state:   endpoint.Connecting,
		picker:  queuePicker{},
		counted: notCounted,
		chosen:  notChosen,
	}
}

// inputsOf returns the ClusterConfigs a cluster's priorities are made of.
func inputsOf(snap *watchers.Snapshot, name string) []*watchers.ClusterConfig {
	root := snap.Clusters.Get(name)
	in := []*watchers.ClusterConfig{root}
	if root != nil && root.Err == nil && root.Cluster != nil && root.Cluster.Kind == resources.ClusterKindAggregate {
		for _, leaf := range root.Leaves {
			in = append(in, snap.Clusters.Get(leaf))
		}
	}
	return in
}

// refreshClusterLocked rebuilds cl's priorities if its part of the
// snapshot changed, or always with force (a DNS resolution changed).
func (s *Set) refreshClusterLocked(cl *Cluster, force bool) {
	if s.snap == nil {
		return
	}
	if cl.idle {
		// Built when it wakes (wakeLocked), from the snapshot then in
		// force: an idle cluster holds its picker, and the error of its
		// ClusterConfig for its RPCs to fail with at once.
		var err error
		switch root := s.snap.Clusters.Get(cl.name); {
		case root == nil:
			err = fmt.Errorf("cluster %q is not in the xDS configuration", cl.name)
		case root.Err != nil:
			err = about(cl.name, root.Err)
		}
		// A new picker if the error changed, or if there is none and the
		// picker is not an idle one yet (a new cluster, or one put to
		// sleep): an update that changes neither costs nothing.
		if _, idlePicked := cl.picker.(idlePicker); errText(err) != errText(cl.err) || (err == nil && !idlePicked) {
			s.dirty[cl] = struct{}{}
		}
		cl.err = err
		return
	}
	if !force && len(cl.inputs) == 1 && cl.inputs[0] != nil && cl.inputs[0] == s.snap.Clusters.Get(cl.name) &&
		(cl.inputs[0].Cluster == nil || cl.inputs[0].Cluster.Kind != resources.ClusterKindAggregate) {
		// The usual case, without the allocation of inputsOf: a cluster
		// that is no aggregate, unchanged. Each update looks at every
		// cluster, so this is paid per cluster per update.
		return
	}
	inputs := inputsOf(s.snap, cl.name)
	if !force && slices.Equal(inputs, cl.inputs) {
		return
	}
	cl.inputs = inputs
	var leaves []string
	if len(inputs) > 1 {
		leaves = inputs[0].Leaves
	}
	s.setAggLeavesLocked(cl, leaves)
	old := cl.conns()
	before, oldPrios := cl.carried(), cl.prios
	oldDNS, oldHeld, oldScaled := cl.dnsUsed, cl.held, cl.scaled
	cl.scaled = nil
	cl.prios, cl.err, cl.leafErrs, cl.dnsUsed, cl.held = nil, nil, nil, nil, heldRefs{}
	root := inputs[0]
	switch {
	case root == nil: // the snapshot promises otherwise
		cl.err = fmt.Errorf("cluster %q is not in the xDS configuration", cl.name)
	case root.Err != nil:
		cl.err = about(cl.name, root.Err)
	case len(inputs) == 1:
		s.addLeafLocked(cl, root)
	default:
		for i, leaf := range inputs[1:] {
			if leaf == nil {
				cl.leafErrs = append(cl.leafErrs, fmt.Sprintf("cluster %q is not in the xDS configuration", root.Leaves[i]))
				continue
			}
			s.addLeafLocked(cl, leaf)
		}
	}
	if cl.err == nil && len(cl.prios) == 0 {
		cl.err = fmt.Errorf("cluster %q has no endpoints", cl.name)
		if len(cl.leafErrs) > 0 {
			cl.err = fmt.Errorf("cluster %q has no usable endpoints: %s", cl.name, strings.Join(cl.leafErrs, "; "))
		}
	}
	for _, p := range cl.prios {
		p.lb.Before = before
		p.lb.Repick, p.lb.Clock = s.repickLocked(cl, p), s.clock
	}
	closeLeaves(oldPrios)
	s.attachOutliersLocked(cl)
	now := cl.conns()
	for c := range now {
		s.pool.AddUser(c, cl)
	}
	for c := range old {
		if _, ok := now[c]; !ok {
			s.dropUserLocked(c, cl)
		}
	}
	s.applyScaleLocked(cl, oldScaled)
	for _, w := range cl.dnsUsed {
		w.users[cl] = struct{}{}
	}
	for _, w := range oldDNS {
		if !slices.Contains(cl.dnsUsed, w) {
			delete(w.users, cl)
		}
	}
	s.releaseLocked(oldHeld)
	s.dirty[cl] = struct{}{}
	s.pruneConns = true
}

// dropUserLocked takes cl off c's users; c, left with none, is an orphan
// for Finish to shut down unless some cluster takes it again.
func (s *Set) dropUserLocked(c *endpoint.Endpoint, cl *Cluster) {
	s.pool.RemoveUser(c, cl)
}

// setAggLeavesLocked lists cl in aggUsers under each of leaves, and no
// longer under the leaves it had.
func (s *Set) setAggLeavesLocked(cl *Cluster, leaves []string) {
	if slices.Equal(cl.aggLeaves, leaves) {
		return
	}
	for _, leaf := range cl.aggLeaves {
		if users := s.aggUsers[leaf]; users != nil {
			delete(users, cl)
			if len(users) == 0 {
				delete(s.aggUsers, leaf)
			}
		}
	}
	for _, leaf := range leaves {
		users := s.aggUsers[leaf]
		if users == nil {
			users = make(map[*Cluster]struct{})
			s.aggUsers[leaf] = users
		}
		users[cl] = struct{}{}
	}
	cl.aggLeaves = leaves
}

// addLeafLocked appends the priorities of one leaf cluster.
func (s *Set) addLeafLocked(cl *Cluster, leaf *watchers.ClusterConfig) {
	if leaf.Err != nil {
		cl.leafErrs = append(cl.leafErrs, about(leaf.Name, leaf.Err).Error())
		return
	}
	c := leaf.Cluster
	if c == nil || (c.Kind == resources.ClusterKindEDS && leaf.Endpoints == nil) { // the snapshot promises otherwise
		cl.leafErrs = append(cl.leafErrs, fmt.Sprintf("cluster %q is incomplete in the xDS configuration", leaf.Name))
		return
	}
	sec, err := s.host.Security(leaf)
	if err != nil {
		cl.leafErrs = append(cl.leafErrs, err.Error())
		return
	}
	base := priority{
		leaf:        leaf.Name,
		lb:          lbpolicy.Leaf{Policy: &c.LBPolicy},
		maxRequests: c.MaxRequests,
		inflight:    s.counterLocked(cl, leaf.Name),
	}
	if l := base.inflight.limits; l != nil {
		l.set(c.MaxPendingRequests, c.MaxConnections)
	}
	if s.cfg.HTTPOutlierDetection {
		base.outlier = outlier.ConfigOfHTTP(c.OutlierDetection)
	} else {
		base.outlier = outlier.ConfigOf(c.OutlierDetection)
	}
	base.load, base.lrsKey = s.loadLocked(leaf)
	if base.load != nil {
		s.loads[base.lrsKey].refs++
		cl.held.loads = append(cl.held.loads, base.lrsKey)
		base.metrics = lrsMetricsOf(c)
	}
	switch c.Kind {
	case resources.ClusterKindEDS:
		s.addEDSLocked(cl, base, c, leaf.Endpoints, sec)
	case resources.ClusterKindLogicalDNS:
		w := s.resolutionLocked(leaf.DNSAddress)
		cl.dnsUsed = append(cl.dnsUsed, w)
		p := base
		switch {
		case len(w.addrs) > 0:
			conn := s.host.Endpoint(s.pool, EndpointSpec{Addrs: w.addrs, Security: sec, DNS: w, Leaf: leaf.Name})
			cl.scale(conn, c.MaxConnectionsPerHost)
			p.lb.Localities = []lbpolicy.Locality{{Weight: 1, Endpoints: []lbpolicy.WeightedEndpoint{{Endpoint: conn, Weight: 1}}}}
		case w.err != nil:
			cl.leafErrs = append(cl.leafErrs, fmt.Sprintf("cluster %q: resolving %s: %v", leaf.Name, leaf.DNSAddress, w.err))
			return
		default:
			p.pending = true
		}
		cl.prios = append(cl.prios, &p)
	default:
		cl.leafErrs = append(cl.leafErrs, fmt.Sprintf("cluster %q: kind %v cannot be a leaf", leaf.Name, c.Kind))
	}
}

// addEDSLocked appends the priorities of an EDS leaf: its localities by
// priority, with only the HEALTHY and UNKNOWN endpoints, and its drops.
func (s *Set) addEDSLocked(cl *Cluster, base priority, c *resources.Cluster, eps *resources.Endpoints, sec any) {
	var n int
	for _, loc := range eps.Localities {
		n = max(n, int(loc.Priority)+1)
	}
	prios := make([]*priority, n)
	for i := range prios {
		p := base
		p.drops = eps.Drops
		prios[i] = &p
	}
	for _, loc := range eps.Localities {
		l := lbpolicy.Locality{ID: loc.ID, Weight: loc.Weight}
		for _, ep := range loc.Endpoints {
			if ep.HealthStatus != resources.HealthStatusHealthy && ep.HealthStatus != resources.HealthStatusUnknown {
				continue
			}
			e := s.host.Endpoint(s.pool, edsSpec(base.leaf, loc.ID, c, ep, sec))
			cl.scale(e, c.MaxConnectionsPerHost)
			l.Endpoints = append(l.Endpoints, lbpolicy.WeightedEndpoint{Endpoint: e, Weight: ep.Weight})
		}
		if len(l.Endpoints) > 0 {
			p := prios[loc.Priority]
			p.lb.Localities = append(p.lb.Localities, l)
		}
	}
	cl.prios = append(cl.prios, prios...)
}

// edsSpec describes an EDS endpoint of leaf cluster c, named leaf, in
// locality loc, for Host.Endpoint.
func edsSpec(leaf string, loc resources.LocalityID, c *resources.Cluster, ep resources.Endpoint, sec any) EndpointSpec {
	spec := EndpointSpec{Addrs: ep.Addresses, Hostname: ep.Hostname, Security: sec, Leaf: leaf, Locality: loc}
	if c.HTTP11Proxy {
		spec.Proxy = ep.ProxyAddress
	}
	return spec
}

// conns returns every endpoint of cl's priorities.
func (cl *Cluster) conns() map[*endpoint.Endpoint]struct{} {
	out := make(map[*endpoint.Endpoint]struct{})
	for _, p := range cl.prios {
		for _, l := range p.lb.Localities {
			for _, e := range l.Endpoints {
				out[e.Endpoint] = struct{}{}
			}
		}
	}
	return out
}

// dropClusterLocked forgets a cluster the routes no longer name.
func (s *Set) dropClusterLocked(cl *Cluster) {
	s.unbuildLocked(cl)
	delete(s.clusters, cl.name)
	delete(s.dirty, cl)
	s.uncountLocked(cl)
	s.out.changes[cl.name] = nil
}

// unbuildLocked undoes what refreshClusterLocked built of cl: its
// priorities, the endpoints it lists and wants, its timers, DNS names,
// counters and load stores. Endpoints left with no cluster are orphans
// for Finish to shut down.
func (s *Set) unbuildLocked(cl *Cluster) {
	cl.stopTimer()
	cl.stopOutliers()
	cl.outliers = nil
	closeLeaves(cl.prios)
	for c := range cl.wanted {
		s.pool.Unwant(c)
	}
	cl.wanted = nil
	for c := range cl.conns() {
		s.dropUserLocked(c, cl)
	}
	cl.scaled = nil // dropUserLocked took each setting back
	for _, w := range cl.dnsUsed {
		delete(w.users, cl)
	}
	s.releaseLocked(cl.held)
	s.setAggLeavesLocked(cl, nil)
	cl.inputs, cl.prios, cl.err, cl.leafErrs, cl.dnsUsed, cl.held = nil, nil, nil, nil, nil, heldRefs{}
	cl.timedOut, cl.chosen = nil, notChosen
	s.pruneConns = true
}

// pickPriorityLocked chooses the priority cl uses and builds its picker.
// Priorities are tried from the highest: the first with a ready endpoint
// is used; one still connecting is waited for, until its failover timer
// fires; one whose endpoints all fail, or that has none, is passed over.
// Every priority tried is kept connected, so that traffic moves back up as
// soon as a higher priority has a ready endpoint again.
func (s *Set) pickPriorityLocked(cl *Cluster) {
	if cl.err != nil {
		s.setWantedLocked(cl, nil)
		cl.stopTimer()
		cl.state, cl.picker = endpoint.TransientFailure, errPicker{cl.err}
		if cl.chosen != -1 {
			s.host.Log(slog.LevelWarn, "cluster unusable", "cluster", cl.name, "err", cl.err)
		}
		cl.chosen = -1
		return
	}
	if cl.idle {
		s.idleLocked(cl)
		return
	}
	wanted := make(map[*endpoint.Endpoint]struct{})
	chosen, fallback := -1, -1
	state := endpoint.TransientFailure
	var lastErr error
	for i, p := range cl.prios {
		ps, err := p.state(wanted)
		if err != nil {
			lastErr = err
		}
		if ps == endpoint.Ready || ps == endpoint.Idle {
			// An idle priority (pick_first that lost its endpoint) is
			// used as a ready one is: its picker connects on the next
			// request (gRFC A56 counts IDLE as READY here).
			chosen, state = i, ps
			delete(cl.timedOut, i)
			break
		}
		if ps == endpoint.Connecting {
			if !cl.timedOut[i] {
				chosen, state = i, ps
				break
			}
			if fallback < 0 {
				fallback = i
			}
		}
	}
	if chosen < 0 && fallback >= 0 {
		// Every priority failed or timed out, some still connecting: wait
		// for the highest of those.
		chosen, state = fallback, endpoint.Connecting
	}
	s.setWantedLocked(cl, wanted)
	if state == endpoint.Idle {
		s.releaseIdleLocked(cl.prios[chosen])
	}
	if state == endpoint.Connecting && !cl.timedOut[chosen] {
		s.armFailoverLocked(cl, chosen)
	} else {
		cl.stopTimer()
	}
	cl.state = state
	switch {
	case chosen < 0:
		msg := fmt.Sprintf("cluster %q: no priority has a usable endpoint", cl.name)
		if lastErr != nil {
			msg += ": last error: " + lastErr.Error()
		}
		if len(cl.leafErrs) > 0 {
			msg += "; " + strings.Join(cl.leafErrs, "; ")
		}
		cl.picker = errPicker{errors.New(msg)}
		if cl.chosen != -1 {
			s.host.Log(slog.LevelWarn, "cluster has no usable endpoint; its RPCs fail", "cluster", cl.name, "err", msg)
		}
	case state == endpoint.Idle:
		cl.picker = idleLeafPicker{cl.prios[chosen].picker(state, s.headerHash),
			&leafWake{s: s, cl: cl, p: cl.prios[chosen]}}
	default:
		cl.picker = cl.prios[chosen].picker(state, s.headerHash)
		// The first choice is part of applying the configuration, logged
		// by the resolver; a change after it is a decision of its own.
		if cl.chosen != notChosen && cl.chosen != chosen {
			s.host.Log(slog.LevelDebug, "cluster priority switch", "cluster", cl.name,
				"from", cl.chosen, "to", chosen, "leaf", cl.prios[chosen].leaf, "state", state.String())
		}
	}
	cl.chosen = chosen
}

// state sums up the endpoints of p, marking wanted those its policy wants
// connected: Idle if its policy waits for a request to connect
// (pick_first, Leaf.Idle), Ready if an endpoint is ready, Connecting if
// one may yet be (or the DNS name is not resolved yet), else
// TransientFailure with the last error.
func (p *priority) state(wanted map[*endpoint.Endpoint]struct{}) (endpoint.State, error) {
	if p.pending {
		return endpoint.Connecting, nil
	}
	state := endpoint.TransientFailure
	err := errors.New("no healthy endpoints")
	p.lb.Want(wanted) // all but under pick_first (gRFC A62)
	if p.lb.Idle() {
		return endpoint.Idle, nil
	}
	od := p.od()
	for _, l := range p.lb.Localities {
		for _, e := range l.Endpoints {
			c := e.Endpoint
			switch {
			case od.Ejected(c):
				err = lbpolicy.ErrEjected
			case c.State() == endpoint.Ready:
				state = endpoint.Ready
			case c.Usable() && state != endpoint.Ready:
				state = endpoint.Connecting
			case !c.Usable() && c.Err() != nil:
				err = c.Err()
			}
		}
	}
	if state != endpoint.TransientFailure {
		err = nil
	}
	return state, err
}

// setWantedLocked makes wanted the endpoints cl keeps connected.
func (s *Set) setWantedLocked(cl *Cluster, wanted map[*endpoint.Endpoint]struct{}) {
	for c := range cl.wanted {
		if _, ok := wanted[c]; !ok {
			s.pool.Unwant(c)
		}
	}
	for c := range wanted {
		if _, ok := cl.wanted[c]; !ok {
			s.pool.Want(c)
		}
	}
	if wanted == nil {
		wanted = make(map[*endpoint.Endpoint]struct{})
	}
	cl.wanted = wanted
}

// FailoverLogMsg is logged (at debug level) when a cluster gives up on a
// priority still connecting.
const FailoverLogMsg = "cluster failover: priority still connecting after the failover timeout"

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// about returns err as said of cluster name: prefixed with the name, unless
// it names the cluster already (the client's errors do).
func about(name string, err error) error {
	if strings.Contains(err.Error(), strconv.Quote(name)) {
		return err
	}
	return fmt.Errorf("cluster %q: %w", name, err)
}
