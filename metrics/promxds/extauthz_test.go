package promxds_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/metrics/promxds"
	"github.com/goxds/xds/xdsserver"
)

var (
	_ grpcxds.ExtAuthzMetrics   = (*promxds.ExtAuthzCollector)(nil)
	_ xdsserver.ExtAuthzMetrics = (*promxds.ExtAuthzCollector)(nil)
)

// Each check counts once on the counter of its outcome: the client's
// labelled grpc_target and grpc_lb_backend_service, the server's with no
// label (gRFC A92).
func TestExtAuthzCollector(t *testing.T) {
	c := promxds.NewExtAuthzCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	c.ClientExtAuthz("goxds:///svc", "cluster-a", "allowed")
	c.ClientExtAuthz("goxds:///svc", "cluster-a", "allowed")
	c.ClientExtAuthz("goxds:///svc", "cluster-b", "denied")
	c.ClientExtAuthz("goxds:///svc", "cluster-a", "filter_disabled")
	c.ClientExtAuthz("goxds:///svc", "", "failed")
	c.ClientExtAuthz("bad\xff", "cluster-a", "failed")            // dropped: not UTF-8
	c.ClientExtAuthz("goxds:///svc", "cluster-a", "allowed_rpcs") // dropped
	c.ServerExtAuthz("denied")
	c.ServerExtAuthz("failed")
	c.ServerExtAuthz("failed")

	want := `
# HELP grpc_client_ext_authz_allowed_rpcs_total Number of RPCs that were allowed by the ext_authz server.
# TYPE grpc_client_ext_authz_allowed_rpcs_total counter
grpc_client_ext_authz_allowed_rpcs_total{grpc_lb_backend_service="cluster-a",grpc_target="goxds:///svc"} 2
# HELP grpc_client_ext_authz_denied_rpcs_total Number of RPCs that were denied by the ext_authz server.
# TYPE grpc_client_ext_authz_denied_rpcs_total counter
grpc_client_ext_authz_denied_rpcs_total{grpc_lb_backend_service="cluster-b",grpc_target="goxds:///svc"} 1
# HELP grpc_client_ext_authz_failed_rpcs_total Number of RPCs for which the ext_authz call-out failed.
# TYPE grpc_client_ext_authz_failed_rpcs_total counter
grpc_client_ext_authz_failed_rpcs_total{grpc_lb_backend_service="",grpc_target="goxds:///svc"} 1
# HELP grpc_client_ext_authz_filter_disabled_rpcs_total Number of RPCs for which the filter was disabled.
# TYPE grpc_client_ext_authz_filter_disabled_rpcs_total counter
grpc_client_ext_authz_filter_disabled_rpcs_total{grpc_lb_backend_service="cluster-a",grpc_target="goxds:///svc"} 1
# HELP grpc_server_ext_authz_denied_rpcs_total Number of RPCs that were denied by the ext_authz server.
# TYPE grpc_server_ext_authz_denied_rpcs_total counter
grpc_server_ext_authz_denied_rpcs_total 1
# HELP grpc_server_ext_authz_failed_rpcs_total Number of RPCs for which the ext_authz call-out failed.
# TYPE grpc_server_ext_authz_failed_rpcs_total counter
grpc_server_ext_authz_failed_rpcs_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.TrimPrefix(want, "\n"))); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// The HTTP side's counters have goxds's names, and the client's no
// grpc_target.
func TestHTTPExtAuthzCollector(t *testing.T) {
	c := promxds.NewHTTPExtAuthzCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	c.ClientExtAuthz("", "cluster-a", "denied")
	c.ServerExtAuthz("allowed")
	want := `
# HELP goxds_http_client_ext_authz_denied_requests_total Number of requests that were denied by the ext_authz server.
# TYPE goxds_http_client_ext_authz_denied_requests_total counter
goxds_http_client_ext_authz_denied_requests_total{grpc_lb_backend_service="cluster-a"} 1
# HELP goxds_http_server_ext_authz_allowed_requests_total Number of requests that were allowed by the ext_authz server.
# TYPE goxds_http_server_ext_authz_allowed_requests_total counter
goxds_http_server_ext_authz_allowed_requests_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.TrimPrefix(want, "\n"))); err != nil {
		t.Error(err)
	}
}
