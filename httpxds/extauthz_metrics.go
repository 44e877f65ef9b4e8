package httpxds

import (
	"github.com/goxds/xds/dataplane/extauthz"
)

// ExtAuthzMetrics counts the outcomes of the Transport's external
// authorization checks (gRFC A92's metrics, for HTTP requests): allowed,
// denied, disabled (filter_enabled left the request out) and failed (the
// call to the service failed or its answer was malformed, whether
// failure_mode_allow then let the request on or not). Its method is
// grpcxds.ExtAuthzMetrics's, so one recorder fits both clients:
// metrics/otelxds's NewHTTPExtAuthzMetrics and metrics/promxds's
// NewHTTPExtAuthzCollector count HTTP requests under goxds's names
// (goxds.http.client_ext_authz.*_requests), apart from gRPC's RPCs;
// NewExtAuthzMetrics and NewExtAuthzCollector would count them with a
// channel's as grpc.client_ext_authz.*.
//
// outcome is the check's (dataplane/extauthz's Outcome.String):
// "allowed", "denied", "filter_disabled" or "failed". target is "" (as for OutlierMetrics: an HTTP client has no channel
// target); backendService is the cluster the request's route chose (its
// weighted cluster's, drawn before the filters run). A route whose
// ExtAuthzPerRoute or FilterConfig turns the filter off makes no check,
// and no count. Implementations must be safe for concurrent use, and
// quick: they run on the request's goroutine as its check ends.
type ExtAuthzMetrics interface {
	ClientExtAuthz(target, backendService, outcome string)
}

// ServerExtAuthzMetrics counts the outcomes of the Server's external
// authorization checks, as ExtAuthzMetrics the Transport's, with no label:
// its method is xdsserver.ExtAuthzMetrics's. metrics/otelxds's
// NewHTTPExtAuthzMetrics and metrics/promxds's NewHTTPExtAuthzCollector
// implement it (goxds.http.server_ext_authz.*_requests).
type ServerExtAuthzMetrics interface {
	ServerExtAuthz(outcome string)
}

// authzObservedView is a request's routing view whose ext_authz checks
// are counted (httpfilter.AuthzObserver); only a Transport with
// ExtAuthzMetrics makes one.
type authzObservedView struct {
	*reqView
	m       ExtAuthzMetrics
	cluster string
}

// AuthzChecked implements httpfilter.AuthzObserver.
func (v *authzObservedView) AuthzChecked(outcome extauthz.Outcome) {
	v.m.ClientExtAuthz("", v.cluster, outcome.String())
}
