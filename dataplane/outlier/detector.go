package outlier

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
)

// MinInterval is the shortest interval a detector runs: an interval of 0
// is valid, but intervals run back to back would keep a core busy and
// count next to nothing.
const MinInterval = 10 * time.Millisecond

// counts are the request outcomes of an endpoint over one interval: the
// responses and failures, and, when locally originated errors are counted
// apart (Config.SplitLocalOrigin), the requests the endpoint answered
// (localOK) or never did (localFailed).
type counts struct{ ok, failed, localOK, localFailed atomic.Int64 }

// epState is the outlier detection state of one endpoint.
type epState struct {
	// active counts the running interval's requests, from any goroutine
	// without a lock (Record); swapped for a new one at each interval.
	active atomic.Pointer[counts]
	// The rest is guarded by the owner's lock: the last interval's
	// counts, and the ejection (ejectedAt zero when not ejected;
	// multiplier grows with each ejection and shrinks at each interval
	// without one).
	ok, failed, localOK, localFailed int64
	ejectedAt                        time.Time
	multiplier                       int64
	// run5xx, runGateway and runLocal are the endpoint's runs of 5xx,
	// gateway failures and (split) locally originated failures
	// (consecutive.go), from Record without a lock.
	run5xx, runGateway, runLocal atomic.Int64
}

// Detector runs outlier detection over the endpoints of one priority of
// a cluster. Record may be called from any goroutine; every other method
// under the owner's lock, which also guards the detector's state.
type Detector struct {
	// eps is replaced, never changed, by Update, so that Record reads it
	// without the owner's lock.
	eps atomic.Pointer[map[*endpoint.Endpoint]*epState]
	cfg Config
	// runs is what Record reads of cfg's consecutive detectors, replaced
	// by Update; runsOff when neither is on.
	runs atomic.Pointer[consecutiveCfg]
	// clock runs the interval timer; locked runs its work under the
	// owner's lock.
	clock  lbpolicy.Clock
	locked func(f func() bool)
	// metrics hears of the outliers found, labelled backendService; nil:
	// nothing is counted. Read-only after New.
	metrics        Metrics
	backendService string
	// timerStart is when the running interval started (zero before the
	// first ended); timer fires at its end (nil when none runs).
	timerStart time.Time
	timer      lbpolicy.Timer
	stopped    bool
}

// New returns a detector whose interval timer runs on clock (nil: the
// real one). At the end of each interval the timer calls locked, which
// must run f under the owner's lock before it returns (or not at all,
// once the owner is closed) and, if f returns true, have the priority's pickers built again:
// an endpoint was ejected or returned. No timer runs before the first
// Update. m, if not nil, hears of each outlier found (gRFC A91), as an
// outlier of backendService (the leaf cluster), once locked has returned.
func New(clock lbpolicy.Clock, locked func(f func() bool), m Metrics, backendService string) *Detector {
	if clock == nil {
		clock = lbpolicy.RealClock{}
	}
	d := &Detector{clock: clock, locked: locked, metrics: m, backendService: backendService}
	d.eps.Store(new(map[*endpoint.Endpoint]*epState))
	d.runs.Store(runsOff)
	return d
}

// Update applies a configuration and the priority's localities to d, and
// starts its timer if none runs. Endpoints it keeps keep their counts and
// ejections; a changed interval counts from the start of the running one,
// as gRPC's does.
func (d *Detector) Update(cfg Config, localities []lbpolicy.Locality) {
	old := *d.eps.Load()
	eps := make(map[*endpoint.Endpoint]*epState)
	for _, l := range localities {
		for _, e := range l.Endpoints {
			if st := old[e.Endpoint]; st != nil {
				eps[e.Endpoint] = st
				continue
			}
			st := new(epState)
			st.active.Store(new(counts))
			eps[e.Endpoint] = st
		}
	}
	d.eps.Store(&eps)
	if d.timer != nil && cfg.Interval != d.cfg.Interval {
		d.timer.Stop()
		d.timer = nil
	}
	d.cfg = cfg
	d.runs.Store(consecutiveOf(cfg))
	if d.timer == nil && !d.stopped {
		d.startTimer()
	}
}

// Stop stops d's timer for good: the owner no longer uses d.
func (d *Detector) Stop() {
	d.stopped = true
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}

// startTimer arms the timer to end the running interval.
func (d *Detector) startTimer() {
	wait := d.cfg.Interval
	if !d.timerStart.IsZero() {
		wait -= d.clock.Now().Sub(d.timerStart)
	}
	var t lbpolicy.Timer
	t = d.clock.AfterFunc(max(wait, MinInterval), func() {
		var found *tally
		if d.metrics != nil {
			found = new(tally)
		}
		d.locked(func() bool {
			if d.timer != t { // stopped, or replaced by Update
				return false
			}
			changed := d.runInterval(found)
			d.startTimer()
			return changed
		})
		if found != nil {
			found.report(d.metrics, d.backendService) // with no lock held
		}
	})
	d.timer = t
}

// Record counts the outcome of one request on ep, from any goroutine and
// without a lock: what a failure is is the transport's to say (gRPC: any
// error). An endpoint d does not balance (removed by an Update since the
// pick) is not counted. A nil d records nothing. It is RecordOutcome with
// Success or Failure.
func (d *Detector) Record(ep *endpoint.Endpoint, success bool) {
	o := Failure
	if success {
		o = Success
	}
	d.RecordOutcome(ep, o)
}

// RecordOutcome counts the outcome o of one request on ep, as Record
// does, and extends or ends ep's runs for the consecutive detectors
// (consecutive.go). The request that completes a run ejects ep at once,
// through the owner's locked callback: so, with a consecutive detector
// on, RecordOutcome must be called with no lock of the owner held.
func (d *Detector) RecordOutcome(ep *endpoint.Endpoint, o Outcome) {
	if d == nil || o == Cancelled {
		return
	}
	st := (*d.eps.Load())[ep]
	if st == nil {
		return
	}
	cc := d.runs.Load()
	if o == LocalOriginFailure && !cc.split {
		o = GatewayFailure // Envoy's default: one bucket
	}
	c := st.active.Load()
	switch o {
	case Success:
		c.ok.Add(1)
	case LocalOriginFailure:
		c.localFailed.Add(1)
	default:
		c.failed.Add(1)
	}
	if cc.split && o != Failure && o != LocalOriginFailure {
		c.localOK.Add(1) // a response: the connection worked
	}
	if cc == runsOff {
		return
	}
	fiveXX, gateway, local := countRun(st, cc, o)
	if fiveXX != nil {
		d.ejectRun(st, fiveXX, algConsecutive5xx)
	}
	if gateway != nil {
		d.ejectRun(st, gateway, algConsecutiveGateway)
	}
	if local != nil {
		d.ejectRun(st, local, algConsecutiveLocalOrigin)
	}
}

// Ejected reports whether d has ejected ep; false for a nil d. It
// implements lbpolicy.Ejector.
func (d *Detector) Ejected(ep *endpoint.Endpoint) bool {
	if d == nil {
		return false
	}
	st := (*d.eps.Load())[ep]
	return st != nil && !st.ejectedAt.IsZero()
}

var _ lbpolicy.Ejector = (*Detector)(nil)

// runInterval ends an interval (gRFC A50): the counts of the interval
// become the ones judged, each algorithm ejects its outliers, the
// endpoints not ejected earn back some of their ejection time, and those
// ejected long enough return. It reports whether an ejection changed, and
// counts the outliers found in found, if not nil.
func (d *Detector) runInterval(found *tally) bool {
	now := d.clock.Now()
	d.timerStart = now
	eps := *d.eps.Load()
	for _, st := range eps {
		c := st.active.Swap(new(counts))
		st.ok, st.failed = c.ok.Load(), c.failed.Load()
		st.localOK, st.localFailed = c.localOK.Load(), c.localFailed.Load()
	}
	changed := d.successRate(eps, d.cfg.SuccessRate, false, now, found, algSuccessRate)
	changed = d.failurePercentage(eps, d.cfg.FailurePercentage, false, now, found, algFailurePercentage) || changed
	if d.cfg.SplitLocalOrigin {
		// Envoy's split mode: the locally originated outcomes are
		// judged apart, with the same parameters and their own
		// enforcing percentages.
		changed = d.successRate(eps, d.cfg.LocalOriginSuccessRate, true, now, found, algLocalOriginSuccessRate) || changed
		changed = d.failurePercentage(eps, d.cfg.LocalOriginFailurePercentage, true, now, found, algLocalOriginFailurePercentage) || changed
	}
	for _, st := range eps {
		switch {
		case st.ejectedAt.IsZero():
			st.multiplier = max(0, st.multiplier-1)
		case !now.Before(st.ejectedAt.Add(d.ejectionTime(st))):
			st.ejectedAt = time.Time{}
			changed = true
		}
	}
	return changed
}

// ejectionTime is how long st stays ejected: the base ejection time times
// its multiplier, at most the larger of the base and the maximum.
func (d *Detector) ejectionTime(st *epState) time.Duration {
	limit := max(d.cfg.BaseEjectionTime, d.cfg.MaxEjectionTime)
	if st.multiplier > 0 && d.cfg.BaseEjectionTime > limit/time.Duration(st.multiplier) {
		return limit // the product would pass the limit, or overflow
	}
	return min(d.cfg.BaseEjectionTime*time.Duration(st.multiplier), limit)
}

// successRate runs the success rate algorithm sr (nil: off) over the
// last interval's responses, or its locally originated outcomes if
// local, and reports whether it ejected an endpoint.
func (d *Detector) successRate(eps map[*endpoint.Endpoint]*epState, sr *SuccessRate, local bool, now time.Time, found *tally, alg int) bool {
	if sr == nil {
		return false
	}
	cands := candidates(eps, sr.RequestVolume, local)
	if len(cands) < int(sr.MinimumHosts) || len(cands) == 0 {
		return false
	}
	var sum, sqSum float64
	for _, st := range cands {
		r := st.rate(local)
		sum += r
		sqSum += r * r
	}
	mean := sum / float64(len(cands))
	stdev := math.Sqrt(max(0, sqSum/float64(len(cands))-mean*mean))
	required := mean - stdev*float64(sr.StdevFactor)/1000
	changed := false
	for _, st := range cands {
		if st.rate(local) < required {
			changed = d.eject(eps, st, sr.Enforcement, now, found, alg) || changed
		}
	}
	return changed
}

// failurePercentage runs the failure percentage algorithm fp (nil: off)
// as successRate runs its own.
func (d *Detector) failurePercentage(eps map[*endpoint.Endpoint]*epState, fp *FailurePercentage, local bool, now time.Time, found *tally, alg int) bool {
	if fp == nil {
		return false
	}
	cands := candidates(eps, fp.RequestVolume, local)
	if len(cands) < int(fp.MinimumHosts) {
		return false
	}
	changed := false
	for _, st := range cands {
		ok, failed := st.outcomes(local)
		if 100*float64(failed)/float64(ok+failed) > float64(fp.Threshold) {
			changed = d.eject(eps, st, fp.Enforcement, now, found, alg) || changed
		}
	}
	return changed
}

// outcomes returns st's successes and failures in the last interval: of
// its responses, or of its locally originated outcomes if local.
func (st *epState) outcomes(local bool) (ok, failed int64) {
	if local {
		return st.localOK, st.localFailed
	}
	return st.ok, st.failed
}

// rate is st's success rate in the last interval (outcomes(local)); only
// for a candidate, which has a request.
func (st *epState) rate(local bool) float64 {
	ok, failed := st.outcomes(local)
	return float64(ok) / float64(ok+failed)
}

// candidates returns the endpoints with at least volume requests in the
// last interval, counted as outcomes(local) counts them (and at least one:
// a rate needs a denominator).
func candidates(eps map[*endpoint.Endpoint]*epState, volume uint32, local bool) []*epState {
	var out []*epState
	for _, st := range eps {
		ok, failed := st.outcomes(local)
		if n := ok + failed; n >= int64(volume) && n > 0 {
			out = append(out, st)
		}
	}
	return out
}

// eject ejects st, an outlier algorithm alg found, with probability
// enforcement%, unless max_ejection_percent of the endpoints are ejected
// already; it reports whether it did, and counts the verdict in found if
// not nil.
func (d *Detector) eject(eps map[*endpoint.Endpoint]*epState, st *epState, enforcement uint32, now time.Time, found *tally, alg int) bool {
	v := d.judge(eps, st, enforcement)
	if found != nil {
		found[alg][v]++
	}
	if v != ejected {
		return false
	}
	st.ejectedAt = now
	st.multiplier++
	return true
}

// judge decides what becomes of outlier st, in the order gRFC A50 (and
// A91's unenforced reasons) take: out already, then the cap, then the
// enforcing chance.
func (d *Detector) judge(eps map[*endpoint.Endpoint]*epState, st *epState, enforcement uint32) verdict {
	if !st.ejectedAt.IsZero() {
		return wasEjected
	}
	n := 0
	for _, e := range eps {
		if !e.ejectedAt.IsZero() {
			n++
		}
	}
	if 100*float64(n)/float64(len(eps)) >= float64(d.cfg.MaxEjectionPercent) {
		return overflow
	}
	if rand.Uint32N(100) >= enforcement {
		return notEnforced
	}
	return ejected
}
