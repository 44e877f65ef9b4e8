package grpcxds

import (
	"time"

	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/dataplane/httpfilter"
)

// ExtProcMetrics records what gRFC A93 measures of a channel's external
// processing filters: how long each event of an RPC (its headers, its
// half-close, the server's headers and trailers) spent in a filter, from
// when the filter saw it to when it let it go on, for the histograms
// grpc.client_ext_proc.client_headers_duration,
// .client_half_close_duration, .server_headers_duration and
// .server_trailers_duration (the name is "grpc.client_ext_proc." + event
// + "_duration"; event is "client_headers", "client_half_close",
// "server_headers" or "server_trailers", as extproc.Event's String). An event that fails the RPC is not
// reported. A half-close is measured until the processor gives it back
// and the filter sends it on; a Trailers-Only response's headers count as
// the trailers too, as grpc-go counts them.
//
// Implementations must be safe for concurrent use, and quick: they run on
// the RPC's goroutines.
type ExtProcMetrics interface {
	// ClientExtProcDuration reports one event: target is the channel's
	// canonical target (grpc.target), backendService the cluster the
	// route sent the RPC to (grpc.lb.backend_service, gRFC A89; "" for a
	// route whose cluster specifier plugin picks it later).
	ClientExtProcDuration(target, backendService, event string, d time.Duration)
}

// procMetrics is an RPC's ExtProcMetrics, its labels bound.
type procMetrics struct {
	m               ExtProcMetrics
	target, cluster string
}

func (p procMetrics) EventDuration(e extproc.Event, d time.Duration) {
	p.m.ClientExtProcDuration(p.target, p.cluster, e.String(), d)
}

// procMetricsFunc is a channel's httpfilter.Env.ProcMetrics.
type procMetricsFunc = func(httpfilter.Request) extproc.Metrics

// procMetricsFor is the httpfilter.Env.ProcMetrics of a channel of
// target whose RPCs m measures; nil without m.
func procMetricsFor(m ExtProcMetrics, target string) procMetricsFunc {
	if m == nil {
		return nil
	}
	return func(req httpfilter.Request) extproc.Metrics {
		pm := procMetrics{m: m, target: target}
		if sel, ok := req.(*selection); ok {
			pm.cluster = sel.cluster
		}
		return pm
	}
}
