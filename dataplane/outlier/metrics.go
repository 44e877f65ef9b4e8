package outlier

// Metrics hears of the outliers detectors find (gRFC A91): each outlier
// one of the two algorithms found in an interval, ejected or not. A
// detector calls it once the interval's work is done and the owner's
// lock released (a recorder is the user's code, and runs under no lock of
// ours), from the goroutine of the interval's timer. Implementations must
// be safe for concurrent use. backendService is the leaf cluster the
// detector balances (gRFC A89's grpc.lb.backend_service); method is
// MethodSuccessRate or MethodFailurePercentage (or, for an HTTP cluster,
// MethodConsecutive5xx, MethodConsecutiveGatewayFailure or
// MethodConsecutiveLocalOriginFailure, reported from the goroutine that
// finished the request, or MethodLocalOriginSuccessRate or
// MethodLocalOriginFailurePercentage), reason
// ReasonEnforcementPercentage or ReasonMaxEjectionOverflow: the values of
// the gRFC's labels.
type Metrics interface {
	// EjectionEnforced: the outlier was ejected.
	EjectionEnforced(backendService, method string)
	// EjectionUnenforced: the outlier was left in, for reason.
	EjectionUnenforced(backendService, method, reason string)
}

// The detection methods and unenforced reasons, as gRFC A91 spells them.
const (
	MethodSuccessRate       = "success_rate"
	MethodFailurePercentage = "failure_percentage"
	// ReasonEnforcementPercentage: the algorithm's enforcing percentage
	// drew against the ejection.
	ReasonEnforcementPercentage = "enforcement_percentage"
	// ReasonMaxEjectionOverflow: max_ejection_percent of the endpoints
	// were ejected already.
	ReasonMaxEjectionOverflow = "max_ejection_overflow"
)

// verdict is what became of an outlier an algorithm found.
type verdict uint8

const (
	// wasEjected: the endpoint was out already; nothing to count (gRPC
	// would eject it again; this detector leaves its ejection running).
	wasEjected verdict = iota
	ejected
	overflow    // max_ejection_percent reached
	notEnforced // the enforcing percentage drew against it
)

// The algorithms, as tally indexes them.
const (
	algSuccessRate = iota
	algFailurePercentage
	algConsecutive5xx
	algConsecutiveGateway
	algConsecutiveLocalOrigin
	algLocalOriginSuccessRate
	algLocalOriginFailurePercentage
	numAlgs
)

// tally counts outliers by algorithm and verdict, to report once the
// owner's lock is released: an interval's, or a consecutive detector's
// one.
type tally [numAlgs][4]int

var methods = [numAlgs]string{MethodSuccessRate, MethodFailurePercentage, MethodConsecutive5xx, MethodConsecutiveGatewayFailure,
	MethodConsecutiveLocalOriginFailure, MethodLocalOriginSuccessRate, MethodLocalOriginFailurePercentage}

// report tells m what t counted.
func (t *tally) report(m Metrics, backendService string) {
	for i, byVerdict := range t {
		for range byVerdict[ejected] {
			m.EjectionEnforced(backendService, methods[i])
		}
		for range byVerdict[overflow] {
			m.EjectionUnenforced(backendService, methods[i], ReasonMaxEjectionOverflow)
		}
		for range byVerdict[notEnforced] {
			m.EjectionUnenforced(backendService, methods[i], ReasonEnforcementPercentage)
		}
	}
}
