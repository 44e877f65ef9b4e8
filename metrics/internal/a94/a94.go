// Package a94 holds what the metrics adapters share of gRFC A94, the
// subchannel metrics: the four instruments as grpc-go (v1.85) registers
// them, and the labels goxds gives them, measured by grpcxds's SubConns
// and reported through grpcxds.SubchannelMetrics; and their four
// counterparts for httpxds's connections (httpxds.ConnectionMetrics).
package a94

import "github.com/goxds/xds/metrics/internal/instrument"

// Instrument is one instrument of gRFC A94. Its Labels are grpc.target,
// then the optional labels goxds records, in grpc-go's order.
type Instrument = instrument.Instrument

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

// The HTTP client's instruments: what A94's measure of a channel's
// subchannels, of an httpxds.Transport's TCP connections to its
// endpoints, under goxds's names. grpc.subchannel.* name gRPC's
// subchannels, which an HTTP client has not, and a process with both
// clients would mix them in one series; OpenTelemetry's HTTP
// conventions have http.client.open_connections, but with a connection
// state (active or idle) and a server address these do not record, and
// an instrumented net/http in the same process would report it too.
// Units, labels and reasons are A94's, less grpc.target: an HTTP client
// has no channel target (its endpoints are shared by every host it
// routes).
var (
	HTTPDisconnections = Instrument{
		Name:        "goxds.http.client.disconnections",
		Description: "Number of times a connection of an HTTP client to an endpoint closed after it was made.",
		Unit:        "{disconnection}",
		Labels:      []string{KeyBackendService, KeyLocality, KeyDisconnectError},
	}
	HTTPAttemptsSucceeded = Instrument{
		Name:        "goxds.http.client.connection_attempts_succeeded",
		Description: "Number of connections an HTTP client made to its endpoints.",
		Unit:        "{attempt}",
		Labels:      []string{KeyBackendService, KeyLocality},
	}
	HTTPAttemptsFailed = Instrument{
		Name:        "goxds.http.client.connection_attempts_failed",
		Description: "Number of connections an HTTP client failed to make to its endpoints.",
		Unit:        "{attempt}",
		Labels:      []string{KeyBackendService, KeyLocality},
	}
	HTTPOpenConnections = Instrument{
		Name:        "goxds.http.client.open_connections",
		Description: "Number of connections an HTTP client has open to its endpoints.",
		Unit:        "{connection}",
		Labels:      []string{KeyBackendService, KeyLocality},
	}
)

// HTTP lists the HTTP client's instruments, in All's order.
var HTTP = []Instrument{HTTPDisconnections, HTTPAttemptsSucceeded, HTTPAttemptsFailed, HTTPOpenConnections}

// The attribute keys.
const (
	KeyTarget          = "grpc.target"
	KeyBackendService  = "grpc.lb.backend_service"
	KeyLocality        = "grpc.lb.locality"
	KeyDisconnectError = "grpc.disconnect_error"
)
