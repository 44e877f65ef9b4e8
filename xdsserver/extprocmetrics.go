package xdsserver

import (
	"time"

	"google.golang.org/grpc"

	"github.com/goxds/xds/dataplane/extproc"
)

// ExtProcMetrics records what gRFC A93 measures of a server's external
// processing filters: how long each event of an RPC (the client's
// headers and half-close, the handler's headers and trailers) spent in a
// filter, from when the filter saw it to when it let it go on, for the
// histograms grpc.server_ext_proc.client_headers_duration,
// .client_half_close_duration, .server_headers_duration and
// .server_trailers_duration (the name is "grpc.server_ext_proc." + event
// + "_duration"; event is extproc.Event's String), which have no labels. An event that
// fails the RPC is not reported. Implementations must be safe for
// concurrent use, and quick: they run on the RPC's goroutines.
// metrics/otelxds and metrics/promxds implement it.
type ExtProcMetrics interface {
	ServerExtProcDuration(event string, d time.Duration)
}

// WithExtProcMetrics returns an option that reports the events of the
// server's external processing filters to m (gRFC A93's metrics).
// Without it nothing is measured.
func WithExtProcMetrics(m ExtProcMetrics) grpc.ServerOption {
	return serverOption{apply: func(o *options) { o.procMetrics = m }}
}

// serverProcMetrics is m as the filters' extproc.Metrics.
type serverProcMetrics struct{ m ExtProcMetrics }

func (s serverProcMetrics) EventDuration(e extproc.Event, d time.Duration) {
	s.m.ServerExtProcDuration(e.String(), d)
}

// withProcMetrics is p reporting to the server's ExtProcMetrics, if any.
func (s *GRPCServer) withProcMetrics(p *extproc.Processor) *extproc.Processor {
	if s.opts.procMetrics == nil {
		return p
	}
	return p.WithMetrics(serverProcMetrics{s.opts.procMetrics})
}
