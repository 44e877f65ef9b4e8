package outlier

import "errors"

// Envoy's consecutive_5xx and consecutive_gateway_failure detectors
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier),
// which HTTP clusters have and gRPC's (gRFC A50) do not: an endpoint is
// ejected as soon as its run of 5xx (or gateway failures) reaches the
// threshold, not at the end of an interval. The run is two atomic
// counters per endpoint, bumped and reset by Record without a lock; only
// the request that completes a run takes the owner's lock, to eject.

// Outcome is how a request ended, as outlier detection counts it. The
// interval algorithms see only success or failure; the consecutive
// detectors tell the failures apart.
type Outcome uint8

const (
	// Success resets the endpoint's runs of 5xx and gateway failures.
	Success Outcome = iota
	// Failure is a failure of no kind below (gRPC: any error): counted by
	// the interval algorithms, leaving the runs as they were.
	Failure
	// Status5xx is an HTTP 5xx response other than a gateway failure
	// (500, 501, ...): it extends the run of 5xx and ends the run of
	// gateway failures, as Envoy's detector does.
	Status5xx
	// GatewayFailure is a 502, 503 or 504 response. It extends both
	// runs.
	GatewayFailure
	// LocalOriginFailure is a request the endpoint never answered
	// (connection refused, reset, timed out): Envoy's locally originated
	// error. Without Config.SplitLocalOrigin it is a GatewayFailure, as
	// Envoy counts the locally originated errors with the 5xx and the
	// gateway errors by default; with it, it is counted apart, by the
	// local-origin detectors only, and every other HTTP outcome (a
	// response came) is a local-origin success
	// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier).
	LocalOriginFailure
)

// OutcomeError is an error that says which failure it is: a transport
// finishing a request with one (cluster.Done.Finish) has it recorded as
// its Outcome; any other error is a Failure.
type OutcomeError interface {
	error
	Outcome() Outcome
}

// OutcomeOf returns the outcome a request that ended with err records:
// Success for nil, the Outcome of an OutcomeError in err's chain, else
// Failure.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return Success
	}
	var oe OutcomeError
	if errors.As(err, &oe) {
		return oe.Outcome()
	}
	return Failure
}

// Consecutive is one of the consecutive detectors: an endpoint is
// ejected, with probability Enforcement%, when Threshold requests in a
// row failed so.
type Consecutive struct {
	Threshold, Enforcement uint32
}

// consecutiveCfg is what Record reads of the configuration, without the
// owner's lock: the detectors, nil when off, and whether locally
// originated errors are counted apart.
type consecutiveCfg struct {
	fiveXX, gateway, local *Consecutive
	split                  bool
}

// The detection methods of the consecutive detectors, as Envoy's
// statistics spell them; Metrics hears of them as of gRFC A91's.
const (
	MethodConsecutive5xx            = "consecutive_5xx"
	MethodConsecutiveGatewayFailure = "consecutive_gateway_failure"
	// MethodConsecutiveLocalOriginFailure, MethodLocalOriginSuccessRate
	// and MethodLocalOriginFailurePercentage are the detectors of the
	// locally originated errors (Config.SplitLocalOrigin).
	MethodConsecutiveLocalOriginFailure = "consecutive_local_origin_failure"
	MethodLocalOriginSuccessRate        = "local_origin_success_rate"
	MethodLocalOriginFailurePercentage  = "local_origin_failure_percentage"
)

// countRun extends or resets st's runs by outcome o (a
// LocalOriginFailure only when cc.split: RecordOutcome made it a
// GatewayFailure otherwise), and returns the detectors whose threshold
// the run reached (nil: none). Exactly one request completes a run: the
// counter goes back to 0 when it reaches the threshold, so a run as long
// again is found again, as Envoy's is.
func countRun(st *epState, cc *consecutiveCfg, o Outcome) (fiveXX, gateway, local *Consecutive) {
	switch o {
	case LocalOriginFailure:
		// Split: the local run alone; the 5xx and gateway runs ignore
		// locally originated errors.
		if c := cc.local; c != nil && reached(&st.runLocal, c.Threshold) {
			local = c
		}
		return nil, nil, local
	case Failure:
		return nil, nil, nil
	}
	if cc.split && st.runLocal.Load() != 0 {
		st.runLocal.Store(0) // a response came: the connection worked
	}
	if o == Success {
		if st.run5xx.Load() != 0 {
			st.run5xx.Store(0)
		}
		if st.runGateway.Load() != 0 {
			st.runGateway.Store(0)
		}
		return nil, nil, nil
	}
	if o == GatewayFailure {
		if c := cc.gateway; c != nil && reached(&st.runGateway, c.Threshold) {
			gateway = c
		}
	} else if st.runGateway.Load() != 0 {
		st.runGateway.Store(0)
	}
	if c := cc.fiveXX; c != nil && reached(&st.run5xx, c.Threshold) {
		fiveXX = c
	}
	return fiveXX, gateway, nil
}

// reached adds one to a run and reports whether that made it threshold
// long, resetting it if so.
func reached(run interface {
	Add(int64) int64
	CompareAndSwap(old, new int64) bool
}, threshold uint32) bool {
	n := run.Add(1)
	return n >= int64(threshold) && run.CompareAndSwap(n, 0)
}

// ejectRun ejects st's endpoint, found by a consecutive detector, under
// the owner's lock (d.locked, which rebuilds the pickers if it did), as
// the interval algorithms would: unless it is out already or
// max_ejection_percent of the endpoints are, with the detector's
// enforcing chance. Metrics hear of the verdict once the lock is
// released. It runs on the goroutine that finished the request.
func (d *Detector) ejectRun(st *epState, c *Consecutive, alg int) {
	var found *tally
	if d.metrics != nil {
		found = new(tally)
	}
	d.locked(func() bool {
		if d.stopped {
			return false
		}
		eps := *d.eps.Load()
		for _, e := range eps {
			if e == st {
				return d.eject(eps, st, c.Enforcement, d.clock.Now(), found, alg)
			}
		}
		return false // removed by an Update meanwhile
	})
	if found != nil {
		found.report(d.metrics, d.backendService)
	}
}

// runsOff is the consecutive configuration of a detector with neither
// detector on.
var runsOff = &consecutiveCfg{}

// consecutiveOf returns what Record reads of cfg.
func consecutiveOf(cfg Config) *consecutiveCfg {
	if cfg.Consecutive5xx == nil && cfg.ConsecutiveGatewayFailure == nil && !cfg.SplitLocalOrigin {
		return runsOff
	}
	return &consecutiveCfg{fiveXX: cfg.Consecutive5xx, gateway: cfg.ConsecutiveGatewayFailure,
		local: cfg.ConsecutiveLocalOrigin, split: cfg.SplitLocalOrigin}
}
