// Package a91 holds what the metrics adapters share of gRFC A91, outlier
// detection's metrics: the two counters as grpc-go (v1.85) registers
// them, and their labels, measured by goxds's outlier detection
// (dataplane/outlier) and reported through grpcxds.OutlierMetrics.
package a91

import "github.com/goxds/xds/metrics/internal/instrument"

// Instrument is one counter of gRFC A91. Its Labels are grpc-go's, in its
// order, then grpc.lb.backend_service, which the gRFC makes optional and
// grpc-go does not record (it has no cluster name where its outlier
// detection runs); goxds always has it.
type Instrument = instrument.Instrument

// The instruments. Names, descriptions and units are grpc-go's word for
// word (a91_test.go holds them to grpc-go's registry).
var (
	EjectionsEnforced = Instrument{
		Name:        "grpc.lb.outlier_detection.ejections_enforced",
		Description: "EXPERIMENTAL. Number of outlier ejections enforced by detection method",
		Unit:        "{ejection}",
		Labels:      []string{KeyTarget, KeyDetectionMethod, KeyBackendService},
	}
	EjectionsUnenforced = Instrument{
		Name:        "grpc.lb.outlier_detection.ejections_unenforced",
		Description: "EXPERIMENTAL. Number of unenforced outlier ejections due to either `max_ejection_percentage` or `enforcement_percentage`",
		Unit:        "{ejection}",
		Labels:      []string{KeyTarget, KeyDetectionMethod, KeyUnenforcedReason, KeyBackendService},
	}
)

// The attribute keys.
const (
	KeyTarget           = "grpc.target"
	KeyDetectionMethod  = "grpc.lb.outlier_detection.detection_method"
	KeyUnenforcedReason = "grpc.lb.outlier_detection.unenforced_reason"
	KeyBackendService   = "grpc.lb.backend_service"
)
