// Package outlier is outlier detection (gRFC A50, Envoy's
// outlier_detection) for one priority of a cluster, whatever transport
// carries its requests: it counts each endpoint's request outcomes and,
// at the end of every interval, ejects the endpoints whose success rate
// (success_rate_stdev_factor/1000 standard deviations below the mean of
// the endpoints with success_rate_request_volume requests, when at least
// success_rate_minimum_hosts have it) or failure percentage (above
// failure_percentage_threshold, likewise among enough endpoints with
// enough requests) stands out, each algorithm with its enforcing
// percentage, never past max_ejection_percent of the endpoints. An
// ejection lasts base_ejection_time times the number of the endpoint's
// ejections, at most max(base_ejection_time, max_ejection_time); that
// number drops by one at each interval the endpoint is not ejected.
//
// # Use
//
// [ConfigOf] reads a Cluster's outlier_detection as package resources
// decoded and validated it. The owner of a priority (the cluster layer)
// makes a [Detector] with [New], giving it its clock and a way to run
// work under its lock, calls [Detector.Update] with the configuration
// and the priority's localities at every update (endpoints kept keep
// their counts and ejections), hands it to the priority's lbpolicy.Leaf
// as its Ejector, and calls [Detector.Stop] when the priority goes. The
// cluster layer's pick result calls [Detector.RecordOutcome] when the
// transport finishes it (cluster.Done.Finish): a request that ended with
// any error is a failure, so what a success is is the transport's to say
// by the error it passes (grpcxds: the RPC's; httpxds: by its own rule,
// and which failure it was, below).
//
// # Consecutive detectors (HTTP)
//
// An HTTP cluster also has Envoy's consecutive_5xx and
// consecutive_gateway_failure detectors
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier),
// which gRFC A50 leaves out: [ConfigOfHTTP] reads them (consecutive_5xx
// on by default, 5 in a row at 100%; consecutive_gateway_failure ejects
// only with enforcing_consecutive_gateway_failure set), [ConfigOf] does
// not. The transport says how each request failed ([Outcome], through an
// [OutcomeError] to cluster.Done.Finish, read by [OutcomeOf]): a 5xx
// extends the endpoint's run of 5xx; a gateway failure (502, 503, 504,
// or no answer at all) both runs; a success ends both, and a 5xx other
// than a gateway failure ends the gateway run. [Detector.RecordOutcome]
// keeps the runs in atomic counters and, on the request that makes a run
// as long as its threshold, ejects the endpoint at once, through the
// owner's locked callback, with the same cap (max_ejection_percent),
// enforcing chance and ejection time as the interval algorithms; the
// endpoint returns at the end of an interval, as theirs do.
//
// # Locally originated errors (HTTP)
//
// A request the endpoint never answered (refused, reset, timed out) is a
// [LocalOriginFailure]. By default it counts as a gateway failure, in the
// same bucket as the responses, as Envoy counts it without
// split_external_local_origin_errors. With the split (ConfigOfHTTP's
// Config.SplitLocalOrigin), as Envoy's "Outlier detection" overview
// describes it
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier#detection-types),
// the endpoint's local outcomes are counted apart: every response, 5xx
// included, is a local success (the connection worked) and ends the run
// of local failures; a local failure extends only that run, which
// consecutive_local_origin_failure judges at once, and leaves the 5xx and
// gateway runs and the responses' counts alone; at the end of each
// interval the success rate and failure percentage run once over the
// responses (enforcing_success_rate, enforcing_failure_percentage) and
// once over the local outcomes (enforcing_local_origin_success_rate,
// enforcing_failure_percentage_local_origin), with the other parameters
// shared. gRPC (gRFC A50, ConfigOf) has no split.
//
// # State and locking
//
// The detector's state (configuration, each endpoint's last counts,
// ejection time and multiplier, the timer) is guarded by its owner's
// lock, like the endpoints and the leaf it serves: Update, Ejected and
// Stop run under it. Record takes no lock: the running interval's counts
// are atomic counters, and the endpoint map it reads is replaced, never
// changed, by Update, so that the per-request path costs a map lookup and
// an atomic add, as it did inside grpcxds.
//
// # The clock
//
// The interval timer runs on the lbpolicy.Clock given to New (the
// cluster layer's: lbpolicy.RealClock, or a test's fake clock, which
// drives intervals as it drives failover and pick_first's timers; New
// with none takes RealClock). When it fires it calls the
// owner's locked callback with the interval's work; that work does
// nothing if the timer was stopped or replaced meanwhile, and reports
// whether an ejection changed, for the owner to rebuild its pickers. No
// callback of the owner runs under the detector's lock: it has none.
//
// # Metrics
//
// A detector made with a [Metrics] tells it of each outlier an algorithm
// finds at the end of an interval (gRFC A91): ejected
// (EjectionEnforced), or left in because max_ejection_percent of the
// endpoints are out already or the enforcing percentage drew against it
// (EjectionUnenforced, with the reason), by detection method, labelled
// with the detector's backend service (the leaf cluster, gRFC A89). An
// endpoint found while already ejected is not counted: its ejection runs
// on. The interval counts under the owner's lock and reports after it
// was released, from the timer's goroutine, so a recorder runs under no
// lock of ours; with no Metrics nothing is counted, and the request path
// is the same either way. The grpc.target label is the transport's to
// add (grpcxds.OutlierMetrics).
//
// A consecutive detector's outlier is reported the same way, by
// MethodConsecutive5xx or MethodConsecutiveGatewayFailure, from the
// goroutine that finished the request, once the owner's lock is released.
//
// # Seams
//
// The enforcing chance is drawn from math/rand/v2, not injected: the
// tests use 100%.
package outlier
