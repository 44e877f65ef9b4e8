package httpxds_test

import (
	"net/http"
	"testing"

	"github.com/goxds/xds/testutils"
)

// A filter the server's registry accepts but this server has no code for
// (ext_proc: registered server-side for xdsserver) is handled as the HTTP
// client handles one it cannot run (dataplane/httpfilter), after Envoy's
// is_optional
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto#extensions-filters-network-http-connection-manager-v3-httpfilter):
// a required one fails every request with 503 naming the listener and
// the filter (a security filter skipped would let requests through); an
// optional one is skipped.
func TestServerFilterWithoutImplementation(t *testing.T) {
	const target = "dns:///proc.test:1"
	for _, optional := range []bool{false, true} {
		e := newEnv(t, envOptions{edit: testutils.AllowGRPCService(target)})
		f := testutils.ExtProcFilter(target, nil)
		f.IsOptional = optional
		e.serve(e.listener(routes("rc", serveRoute(prefix("/"))), "", nil, f))
		got := e.get("/x")
		if optional {
			e.want(got, http.StatusOK, "")
			continue
		}
		e.want(got, http.StatusServiceUnavailable, `HTTP filter "proc" of type type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor cannot run on an HTTP server`)
		e.want(got, http.StatusServiceUnavailable, `listener "`)
	}
}
