// Package a93 holds what the metrics adapters share of gRFC A93's
// metrics, the external processing filter's: for each event whose time
// in the filter it measures (dataplane/extproc's Event, by its name,
// since the adapters import client only), the client's histogram
// (grpc.client_ext_proc.*, as grpc-go v1.85 registers it) and the
// server's (grpc.server_ext_proc.*, which grpc-go does not have yet),
// reported through grpcxds.ExtProcMetrics and xdsserver.ExtProcMetrics.
package a93

import (
	"github.com/goxds/xds/metrics/internal/a96"
	"github.com/goxds/xds/metrics/internal/instrument"
)

// Instrument is one histogram of gRFC A93, in seconds.
type Instrument = instrument.Instrument

// The events measured, as extproc.Event's String spells them and the
// histograms' names do.
const (
	ClientHeaders   = "client_headers"
	ClientHalfClose = "client_half_close"
	ServerHeaders   = "server_headers"
	ServerTrailers  = "server_trailers"
)

// Events are the events measured, in the gRFC's order.
var Events = []string{ClientHeaders, ClientHalfClose, ServerHeaders, ServerTrailers}

// Bounds are the histograms' bucket boundaries, in seconds: gRFC A66's
// latency buckets, since gRFC A93 names none.
var Bounds = a96.LatencyBounds

// The labels. A client's are grpc-go's (grpc.target), then
// grpc.lb.backend_service, which the gRFC makes optional and grpc-go does
// not record; a server's are none.
const (
	KeyTarget         = "grpc.target"
	KeyBackendService = "grpc.lb.backend_service"
)

// descriptions are the gRFC's, word for word as grpc-go registers them.
var descriptions = map[string]string{
	ClientHeaders:   "Time between when the ext_proc filter sees the client's headers and when it allows those headers to continue on to the next filter.",
	ClientHalfClose: "Time between when the ext_proc filter sees the client's half-close and when it allows that half-close to continue on to the next filter.",
	ServerHeaders:   "Time between when the ext_proc filter sees the server's headers and when it allows those headers to continue on to the next filter.",
	ServerTrailers:  "Time between when the ext_proc filter sees the server's trailers and when it allows those trailers to continue on to the next filter.",
}

// Client is the client's histogram of e (one of Events).
func Client(e string) Instrument {
	return Instrument{Name: "grpc.client_ext_proc." + e + "_duration", Description: descriptions[e],
		Unit: "s", Labels: []string{KeyTarget, KeyBackendService}}
}

// Server is the server's histogram of e (one of Events).
func Server(e string) Instrument {
	return Instrument{Name: "grpc.server_ext_proc." + e + "_duration", Description: descriptions[e], Unit: "s"}
}
