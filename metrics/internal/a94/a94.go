// Package a94 holds what the metrics adapters share of gRFC A94, the
// subchannel metrics: the four instruments as grpc-go (v1.85) registers
// them, and the labels goxds gives them, measured by grpcxds's SubConns
// and reported through grpcxds.SubchannelMetrics.
package a94

// Instrument is one instrument of gRFC A94.
type Instrument struct {
	Name        string
	Description string
	Unit        string
	// Labels are the attribute keys of its measurements: grpc.target, then
	// the optional labels goxds records, in grpc-go's order.
	Labels []string
}

// The instruments. Names and descriptions are grpc-go's word for word
// (a94_test.go holds them to grpc-go's registry); so are the units but
// open_connections', where grpc-go registers "{attempt}" and the gRFC
// says "{connection}": the gRFC's is what it counts. Units add nothing to
// the Prometheus names.
var (
	Disconnections = Instrument{
		Name:        "grpc.subchannel.disconnections",
		Description: "EXPERIMENTAL. Number of times the selected subchannel becomes disconnected.",
		Unit:        "{disconnection}",
		Labels:      []string{KeyTarget, KeyBackendService, KeyLocality, KeyDisconnectError},
	}
	AttemptsSucceeded = Instrument{
		Name:        "grpc.subchannel.connection_attempts_succeeded",
		Description: "EXPERIMENTAL. Number of successful connection attempts.",
		Unit:        "{attempt}",
		Labels:      []string{KeyTarget, KeyBackendService, KeyLocality},
	}
	AttemptsFailed = Instrument{
		Name:        "grpc.subchannel.connection_attempts_failed",
		Description: "EXPERIMENTAL. Number of failed connection attempts.",
		Unit:        "{attempt}",
		Labels:      []string{KeyTarget, KeyBackendService, KeyLocality},
	}
	// OpenConnections is an up-down counter (a Prometheus gauge). Its
	// grpc.security_level label is not recorded: a balancer does not see
	// a connection's handshake.
	OpenConnections = Instrument{
		Name:        "grpc.subchannel.open_connections",
		Description: "EXPERIMENTAL. Number of open connections.",
		Unit:        "{connection}",
		Labels:      []string{KeyTarget, KeyBackendService, KeyLocality},
	}
)

// All lists the instruments.
var All = []Instrument{Disconnections, AttemptsSucceeded, AttemptsFailed, OpenConnections}

// The attribute keys.
const (
	KeyTarget          = "grpc.target"
	KeyBackendService  = "grpc.lb.backend_service"
	KeyLocality        = "grpc.lb.locality"
	KeyDisconnectError = "grpc.disconnect_error"
)
