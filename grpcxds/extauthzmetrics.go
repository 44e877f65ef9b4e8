package grpcxds

import (
	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/dataplane/httpfilter"
)

// ExtAuthzMetrics records what gRFC A92 measures of the channels'
// external authorization filters: each check's outcome, counted by
// grpc.client_ext_authz.allowed_rpcs, denied_rpcs, filter_disabled_rpcs
// (filter_enabled left the RPC out) and failed_rpcs (the call to the
// service failed or its answer was malformed, whether failure_mode_allow
// then let the RPC on or not; a header change disallow_is_error refuses
// counts here too). metrics/otelxds and metrics/promxds implement it.
//
// outcome is the check's (dataplane/extauthz's Outcome.String):
// "allowed", "denied", "filter_disabled" or "failed", a string so that
// the recorders need not import the data plane. target is the channel's target (grpc.target, as for OutlierMetrics);
// backendService the cluster the RPC's route chose (gRFC A89's
// grpc.lb.backend_service), "" when the route leaves the cluster to a
// cluster specifier plugin (RLS), which picks it after the filters run.
// An RPC on a route that turns the filter off is not checked, and not
// counted. Each filter of a listener that has two counts on its own.
//
// Implementations must be safe for concurrent use, and quick: they run on
// the RPC's goroutine as its check ends, with no lock of the channel
// held.
type ExtAuthzMetrics interface {
	ClientExtAuthz(target, backendService, outcome string)
}

// authzObserved is an RPC's selection whose ext_authz checks are counted
// (httpfilter.AuthzObserver). Only channels with ExtAuthzMetrics make
// one: the others' RPCs pay nothing.
type authzObserved struct {
	*selection
	m      ExtAuthzMetrics
	target string
}

// The wrapper is still what the other filters need of the selection:
// ext_proc replaces its headers (extproc.go).
var _ interface {
	httpfilter.AuthzObserver
	httpfilter.HeaderReplacer
} = (*authzObserved)(nil)

// AuthzChecked implements httpfilter.AuthzObserver.
func (o *authzObserved) AuthzChecked(outcome extauthz.Outcome) {
	o.m.ClientExtAuthz(o.target, o.cluster, outcome.String())
}

// filterEnv is what the resolver's configurations' filter chains keep.
func (r *xdsResolver) filterEnv() filterEnv {
	return filterEnv{authz: &r.authz, authzMetrics: r.cs.b.extAuthzMetrics, target: r.target, procMetrics: r.procMetrics}
}
