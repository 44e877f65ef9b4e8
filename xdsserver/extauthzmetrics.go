package xdsserver

import "google.golang.org/grpc"

// ExtAuthzMetrics records what gRFC A92 measures of the server's external
// authorization filters: each check's outcome, counted by
// grpc.server_ext_authz.allowed_rpcs, denied_rpcs, filter_disabled_rpcs
// (filter_enabled left the RPC out) and failed_rpcs (the call to the
// service failed or its answer was malformed, whether failure_mode_allow
// then let the RPC on or not; a header change disallow_is_error refuses
// counts here too), with no label. outcome is the check's
// (dataplane/extauthz's Outcome.String): "allowed", "denied",
// "filter_disabled" or "failed". metrics/otelxds and metrics/promxds
// implement it, and grpcxds.ExtAuthzMetrics with the same recorder.
//
// An RPC on a route that turns the filter off is not checked, and not
// counted. Implementations must be safe for concurrent use, and quick:
// they run on the RPC's goroutine as its check ends.
type ExtAuthzMetrics interface {
	ServerExtAuthz(outcome string)
}

// RecordExtAuthz returns an option that has m count the outcomes of the
// server's external authorization checks (gRFC A92). Without it nothing
// is counted.
func RecordExtAuthz(m ExtAuthzMetrics) grpc.ServerOption {
	return serverOption{apply: func(o *options) { o.authzMetrics = m }}
}
