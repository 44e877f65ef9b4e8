// Package a96 holds what the metrics adapters share of gRFC A96, the
// per-call retry metrics: the two instruments goxds can measure (its
// retries are made in grpcxds's interceptors, which report them through
// grpcxds.RetryMetrics), their units, bucket boundaries and labels.
package a96

// Instrument is one histogram of gRFC A96.
type Instrument struct {
	Name        string
	Description string
	Unit        string
	// Bounds are the histogram's bucket boundaries the gRFC recommends.
	Bounds []float64
}

// The instruments, named, described and bucketed as gRFC A96's table says.
// grpc.client.call.transparent_retries and grpc.client.call.hedges are
// not here: transparent retries happen inside gRPC, below the
// interceptors, and xDS configures no hedging.
var (
	Retries = Instrument{
		Name:        "grpc.client.call.retries",
		Description: "Number of retries during the client call. If there were no retries, 0 is not reported.",
		Unit:        "{retry}",
		Bounds:      []float64{1, 2, 3, 4, 5},
	}
	RetryDelay = Instrument{
		Name:        "grpc.client.call.retry_delay",
		Description: "Total time of delay while there is no active attempt during the client call.",
		Unit:        "s",
		Bounds:      LatencyBounds,
	}
)

// LatencyBounds are gRFC A66's latency buckets, in seconds, which gRFC A96
// recommends for grpc.client.call.retry_delay.
var LatencyBounds = []float64{0, 0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002, 0.003,
	0.004, 0.005, 0.006, 0.008, 0.01, 0.013, 0.016, 0.02, 0.025, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1, 0.13,
	0.16, 0.2, 0.25, 0.3, 0.4, 0.5, 0.65, 0.8, 1, 2, 5, 10, 20, 50, 100}

// The labels of both instruments (gRFC A66's).
const (
	KeyMethod = "grpc.method"
	KeyTarget = "grpc.target"
)
