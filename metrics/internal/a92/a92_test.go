package a92

import (
	"testing"

	"github.com/goxds/xds/dataplane/extauthz"
)

// The tables are indexed by dataplane/extauthz's Outcome, and spell the
// gRFC's names (the server's and HTTP's derived from the client's).
func TestTables(t *testing.T) {
	for o, want := range map[extauthz.Outcome][4]string{
		extauthz.Allowed:  {"grpc.client_ext_authz.allowed_rpcs", "grpc.server_ext_authz.allowed_rpcs", "goxds.http.client_ext_authz.allowed_requests", "goxds.http.server_ext_authz.allowed_requests"},
		extauthz.Denied:   {"grpc.client_ext_authz.denied_rpcs", "grpc.server_ext_authz.denied_rpcs", "goxds.http.client_ext_authz.denied_requests", "goxds.http.server_ext_authz.denied_requests"},
		extauthz.Disabled: {"grpc.client_ext_authz.filter_disabled_rpcs", "grpc.server_ext_authz.filter_disabled_rpcs", "goxds.http.client_ext_authz.filter_disabled_requests", "goxds.http.server_ext_authz.filter_disabled_requests"},
		extauthz.Failed:   {"grpc.client_ext_authz.failed_rpcs", "grpc.server_ext_authz.failed_rpcs", "goxds.http.client_ext_authz.failed_requests", "goxds.http.server_ext_authz.failed_requests"},
	} {
		if Index(o.String()) != int(o) {
			t.Errorf("outcome %d (%s): index %d", o, o, Index(o.String()))
		}
		got := [4]string{Client[o].Name, Server[o].Name, HTTPClient[o].Name, HTTPServer[o].Name}
		if got != want {
			t.Errorf("outcome %d: %q, want %q", o, got, want)
		}
	}
	if Index("allowed_rpcs") != -1 {
		t.Error("Index of an unknown outcome")
	}
	if len(Server[0].Labels) != 0 || len(Client[0].Labels) != 2 || len(HTTPClient[0].Labels) != 1 || len(HTTPServer[0].Labels) != 0 {
		t.Errorf("labels %v %v %v %v", Client[0].Labels, Server[0].Labels, HTTPClient[0].Labels, HTTPServer[0].Labels)
	}
	if d := HTTPClientFailed.Description; d != "Number of requests for which the ext_authz call-out failed." || HTTPClientFailed.Unit != "{request}" {
		t.Errorf("HTTP description %q, unit %q", d, HTTPClientFailed.Unit)
	}
}
