package cluster

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
)

// Outlier detection (gRFC A50): each priority of a leaf cluster with
// outlier_detection counts the RPCs of its endpoints, and at every
// interval ejects those whose success rate or failure percentage stands
// out, for a time that grows each time an endpoint is ejected again. An
// ejected endpoint is, to the cluster's policy and its priority's state,
// failing: the policy passes it over, as gRPC's child policies pass over
// the subchannels its outlier detection reports failing.

// minOutlierInterval is the shortest interval outlier detection runs.
const minOutlierInterval = 10 * time.Millisecond

// errEjected is why an ejected endpoint takes no RPCs: the policies'
// own reason, so that every layer names it alike.
var errEjected = lbpolicy.ErrEjected

// outlierConfig is a cluster's outlier_detection with gRFC A50's defaults.
type outlierConfig struct {
	interval, baseEjection, maxEjection time.Duration
	maxEjectionPercent                  uint32
	successRate                         *ejectionConfig // nil: off
	failurePercent                      *ejectionConfig // nil: off
}

// ejectionConfig is one of the two algorithms' parameters: threshold is
// success_rate_stdev_factor for the success rate, failure_percentage_
// threshold for the failure percentage.
type ejectionConfig struct {
	threshold, enforcement, minimumHosts, requestVolume uint32
}

// outlierConfigOf returns the configuration of od (validated by package
// resources), nil when it ejects nothing: unset, or both algorithms off.
func outlierConfigOf(od *clusterv3.OutlierDetection) *outlierConfig {
	if od == nil {
		return nil
	}
	u32 := func(v interface{ GetValue() uint32 }, def uint32, set bool) uint32 {
		if !set {
			return def
		}
		return v.GetValue()
	}
	c := &outlierConfig{
		interval:           10 * time.Second,
		baseEjection:       30 * time.Second,
		maxEjection:        300 * time.Second,
		maxEjectionPercent: u32(od.GetMaxEjectionPercent(), 10, od.MaxEjectionPercent != nil),
	}
	if d := od.GetInterval(); d != nil {
		c.interval = d.AsDuration()
	}
	if d := od.GetBaseEjectionTime(); d != nil {
		c.baseEjection = d.AsDuration()
	}
	if d := od.GetMaxEjectionTime(); d != nil {
		c.maxEjection = d.AsDuration()
	}
	// The success rate is on unless enforcing_success_rate is 0; the
	// failure percentage only if enforcing_failure_percentage is set and
	// not 0 (gRFC A50).
	if e := u32(od.GetEnforcingSuccessRate(), 100, od.EnforcingSuccessRate != nil); e != 0 {
		c.successRate = &ejectionConfig{
			threshold:     u32(od.GetSuccessRateStdevFactor(), 1900, od.SuccessRateStdevFactor != nil),
			enforcement:   e,
			minimumHosts:  u32(od.GetSuccessRateMinimumHosts(), 5, od.SuccessRateMinimumHosts != nil),
			requestVolume: u32(od.GetSuccessRateRequestVolume(), 100, od.SuccessRateRequestVolume != nil),
		}
	}
	if e := od.GetEnforcingFailurePercentage().GetValue(); e != 0 {
		c.failurePercent = &ejectionConfig{
			threshold:     u32(od.GetFailurePercentageThreshold(), 85, od.FailurePercentageThreshold != nil),
			enforcement:   e,
			minimumHosts:  u32(od.GetFailurePercentageMinimumHosts(), 5, od.FailurePercentageMinimumHosts != nil),
			requestVolume: u32(od.GetFailurePercentageRequestVolume(), 50, od.FailurePercentageRequestVolume != nil),
		}
	}
	if c.successRate == nil && c.failurePercent == nil {
		return nil
	}
	return c
}

// callCounts are the RPC outcomes of an endpoint over one interval.
type callCounts struct{ ok, failed atomic.Int64 }

// odEndpoint is the outlier detection state of one endpoint.
type odEndpoint struct {
	// active counts the current interval's RPCs, from pickers' Done
	// callbacks without a lock; swapped for a new one at each interval.
	active atomic.Pointer[callCounts]
	// Guarded by the owner's lock: the last interval's counts, and the
	// ejection (ejectedAt zero when not ejected; multiplier grows with
	// each ejection and shrinks at each interval without one).
	ok, failed int64
	ejectedAt  time.Time
	multiplier int64
}

// outlierDetector runs outlier detection for one priority of a leaf
// cluster; it lives across the updates that keep the priority. Guarded by
// the owner's lock, but for the counters of its endpoints.
type outlierDetector struct {
	cfg outlierConfig
	eps map[*endpoint.Endpoint]*odEndpoint
	// timerStart is when the running interval started; timer fires at its
	// end (nil once stopped).
	timerStart time.Time
	timer      lbpolicy.Timer
	// clock is time.Now and time.AfterFunc, but in tests, which end the
	// intervals themselves.
	clock lbpolicy.Clock
}

// odKey names a detector within a cluster: the leaf and the index of the
// priority among the leaf's.
type odKey struct {
	leaf string
	prio int
}

// attachOutliersLocked gives each priority of cl whose leaf has outlier
// detection its detector, keeping those of the priorities it had, with
// their counts and ejections, and stops the others.
func (s *Set) attachOutliersLocked(cl *Cluster) {
	old := cl.outliers
	cl.outliers = nil
	var leaf string
	n := 0
	for _, p := range cl.prios {
		if p.leaf != leaf {
			leaf, n = p.leaf, 0
		}
		key := odKey{leaf, n}
		n++
		if p.outlier == nil {
			continue
		}
		d := old[key]
		delete(old, key)
		if d == nil {
			d = &outlierDetector{clock: realClock{}}
		}
		d.update(*p.outlier, p)
		if cl.outliers == nil {
			cl.outliers = make(map[odKey]*outlierDetector)
		}
		cl.outliers[key] = d
		p.lb.Ejected = d
		if d.timer == nil {
			s.startIntervalLocked(cl, d, d.cfg.interval)
		}
	}
	for _, d := range old {
		d.stop()
	}
}

// update applies a new configuration and endpoint list to d. Endpoints it
// keeps keep their state; a changed interval counts from the start of the
// running one, as gRPC's does.
func (d *outlierDetector) update(cfg outlierConfig, p *priority) {
	eps := make(map[*endpoint.Endpoint]*odEndpoint)
	for _, l := range p.lb.Localities {
		for _, e := range l.Endpoints {
			if ep := d.eps[e.Endpoint]; ep != nil {
				eps[e.Endpoint] = ep
				continue
			}
			ep := new(odEndpoint)
			ep.active.Store(new(callCounts))
			eps[e.Endpoint] = ep
		}
	}
	d.eps = eps
	if d.timer != nil && cfg.interval != d.cfg.interval {
		d.timer.Stop()
		d.timer = nil // restarted by the caller, for what is left
	}
	d.cfg = cfg
}

// startIntervalLocked arms d's timer to end the interval after wait.
func (s *Set) startIntervalLocked(cl *Cluster, d *outlierDetector, wait time.Duration) {
	if !d.timerStart.IsZero() {
		wait = d.cfg.interval - d.clock.Now().Sub(d.timerStart)
	}
	// An interval of 0 is valid; run back to back, intervals would keep a
	// core busy and count next to nothing.
	wait = max(wait, minOutlierInterval)
	var t lbpolicy.Timer
	t = d.clock.AfterFunc(wait, func() {
		s.host.Do(func() {
			if s.closed || d.timer != t {
				return
			}
			if d.runInterval() {
				s.dirty[cl] = struct{}{}
			}
			d.timer = nil
			s.startIntervalLocked(cl, d, d.cfg.interval)
		})
	})
	d.timer = t
}

func (d *outlierDetector) stop() {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}

// stopOutliers stops the timers of cl's detectors.
func (cl *Cluster) stopOutliers() {
	for _, d := range cl.outliers {
		d.stop()
	}
}

// Ejected implements lbpolicy.Ejector.
func (d *outlierDetector) Ejected(c *endpoint.Endpoint) bool { return d.ejected(c) }

// ejected reports whether d has ejected c; false for a nil d.
func (d *outlierDetector) ejected(c *endpoint.Endpoint) bool {
	if d == nil {
		return false
	}
	ep := d.eps[c]
	return ep != nil && !ep.ejectedAt.IsZero()
}

// runInterval ends an interval (gRFC A50): the counts of the interval
// become the ones judged, each algorithm ejects its outliers, the
// endpoints not ejected earn back some of their ejection time, and those
// ejected long enough return. It reports whether an ejection changed.
func (d *outlierDetector) runInterval() bool {
	now := d.clock.Now()
	d.timerStart = now
	for _, ep := range d.eps {
		c := ep.active.Swap(new(callCounts))
		ep.ok, ep.failed = c.ok.Load(), c.failed.Load()
	}
	changed := false
	if sr := d.cfg.successRate; sr != nil {
		cands := d.candidates(sr.requestVolume)
		if len(cands) >= int(sr.minimumHosts) && len(cands) > 0 {
			var sum, sqSum float64
			for _, ep := range cands {
				r := float64(ep.ok) / float64(ep.ok+ep.failed)
				sum += r
				sqSum += r * r
			}
			mean := sum / float64(len(cands))
			stdev := math.Sqrt(max(0, sqSum/float64(len(cands))-mean*mean))
			required := mean - stdev*float64(sr.threshold)/1000
			for _, ep := range cands {
				if float64(ep.ok)/float64(ep.ok+ep.failed) < required {
					changed = d.eject(ep, sr.enforcement, now) || changed
				}
			}
		}
	}
	if fp := d.cfg.failurePercent; fp != nil {
		cands := d.candidates(fp.requestVolume)
		if len(cands) >= int(fp.minimumHosts) {
			for _, ep := range cands {
				if 100*float64(ep.failed)/float64(ep.ok+ep.failed) > float64(fp.threshold) {
					changed = d.eject(ep, fp.enforcement, now) || changed
				}
			}
		}
	}
	for _, ep := range d.eps {
		switch {
		case ep.ejectedAt.IsZero():
			ep.multiplier = max(0, ep.multiplier-1)
		case !now.Before(ep.ejectedAt.Add(d.ejectionTime(ep))):
			ep.ejectedAt = time.Time{}
			changed = true
		}
	}
	return changed
}

// ejectionTime is how long ep stays ejected: the base ejection time times
// its multiplier, at most the larger of the base and the maximum.
func (d *outlierDetector) ejectionTime(ep *odEndpoint) time.Duration {
	limit := max(d.cfg.baseEjection, d.cfg.maxEjection)
	if ep.multiplier > 0 && d.cfg.baseEjection > limit/time.Duration(ep.multiplier) {
		return limit // the product would pass the limit, or overflow
	}
	return min(d.cfg.baseEjection*time.Duration(ep.multiplier), limit)
}

// candidates returns the endpoints with at least volume RPCs in the last
// interval (and at least one: a rate needs a denominator).
func (d *outlierDetector) candidates(volume uint32) []*odEndpoint {
	var out []*odEndpoint
	for _, ep := range d.eps {
		if n := ep.ok + ep.failed; n >= int64(volume) && n > 0 {
			out = append(out, ep)
		}
	}
	return out
}

// eject ejects ep with probability enforcement%, unless max_ejection_percent
// of the endpoints are ejected already; it reports whether it did.
func (d *outlierDetector) eject(ep *odEndpoint, enforcement uint32, now time.Time) bool {
	if !ep.ejectedAt.IsZero() {
		return false
	}
	ejected := 0
	for _, e := range d.eps {
		if !e.ejectedAt.IsZero() {
			ejected++
		}
	}
	if 100*float64(ejected)/float64(len(d.eps)) >= float64(d.cfg.maxEjectionPercent) {
		return false
	}
	if rand.Uint32N(100) >= enforcement {
		return false
	}
	ep.ejectedAt = now
	ep.multiplier++
	return true
}

// counters returns, for a picker, each endpoint's counter of RPC
// outcomes; nil without outlier detection.
func (d *outlierDetector) counters() map[*endpoint.Endpoint]*odEndpoint {
	if d == nil {
		return nil
	}
	out := make(map[*endpoint.Endpoint]*odEndpoint, len(d.eps))
	for c, ep := range d.eps {
		if c.Conn() != nil {
			out[c] = ep
		}
	}
	return out
}

// record counts the outcome of one request on ep (err, its error): any
// error is a failure, as in gRPC.
func (ep *odEndpoint) record(err error) {
	c := ep.active.Load()
	if err == nil {
		c.ok.Add(1)
	} else {
		c.failed.Add(1)
	}
}
