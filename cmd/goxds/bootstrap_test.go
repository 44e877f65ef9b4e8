package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goxds/xds/testutils"
)

// The report says what each part of a full bootstrap means: servers in
// order with credentials, api_type and features, the node as sent,
// authorities, templates and certificate providers.
func TestBootstrapReport(t *testing.T) {
	pki := testutils.NewPKI(t)
	boot := fmt.Sprintf(`{
	  "xds_servers": [
	    {"server_uri": "primary.example.com:443", "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": %q}}],
	     "server_features": ["xds_v3", "fail_on_data_errors", "something_new"], "api_type": "AGGREGATED_DELTA_GRPC"},
	    {"server_uri": "fallback.example.com:443", "channel_creds": [{"type": "insecure"}]}
	  ],
	  "node": {"id": "node-7", "cluster": "svc", "locality": {"zone": "z1"}, "clustr": "typo"},
	  "authorities": {
	    "corp.example.com": {"xds_servers": [{"server_uri": "corp-xds:443", "channel_creds": [{"type": "insecure"}]}]},
	    "plain": {}
	  },
	  "server_listener_resource_name_template": "grpc/server?xds.resource.listening_address=%%s",
	  "certificate_providers": {
	    "default": {"plugin_name": "file_watcher", "config": {"certificate_file": %q, "private_key_file": %q, "ca_certificate_file": %q}},
	    "vault": {"plugin_name": "vault_plugin", "config": {}}
	  }
	}`, pki.CAFile, filepath.Join(pki.Dir, "x.pem"), filepath.Join(pki.Dir, "x.key"), pki.CAFile)
	path := writeFile(t, "bootstrap.json", []byte(boot))

	r := goxds(t, runOpts{}, "bootstrap", path)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"bootstrap from " + path + ": valid\nunknown fields, ignored as gRPC ignores them (a typo?): node.clustr\n",
		"  [0] primary.example.com:443\n      channel_creds: tls ca_certificate_file=" + pki.CAFile + "\n      api_type: AGGREGATED_DELTA_GRPC\n",
		"      server_feature fail_on_data_errors: a NACK or a deletion drops the value held (gRFC A88)\n",
		"      server_feature something_new: not known to goxds, ignored\n",
		"  [1] fallback.example.com:443\n      channel_creds: insecure\n      api_type: AGGREGATED_GRPC\n      server_features: none\n",
		`"id":"node-7"`, `"userAgentName":"goxds"`, `"clientFeatures":[`,
		"client_default_listener_resource_name_template: \"%s\"\n",
		"server_listener_resource_name_template: \"grpc/server?xds.resource.listening_address=%s\"\n",
		"  \"corp.example.com\": listener names \"xdstp://corp.example.com/envoy.config.listener.v3.Listener/%s\"\n    [0] corp-xds:443\n",
		"  \"plain\": listener names \"xdstp://plain/envoy.config.listener.v3.Listener/%s\"\n    servers: the top-level xds_servers\n",
		"  \"default\": plugin \"file_watcher\", config {",
		"  \"vault\": plugin \"vault_plugin\", config {}\n    unusable: ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report lacks %q; report:\n%s", want, r.stdout)
		}
	}

	// The same as JSON, for scripts; and from the environment.
	r = goxds(t, runOpts{env: []string{"GRPC_XDS_BOOTSTRAP_CONFIG=" + boot}}, "bootstrap", "-json")
	if r.code != 0 {
		t.Fatalf("-json: exit %d; stderr %s", r.code, r.stderr)
	}
	var rep bootstrapReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("-json output is not the report: %v\n%s", err, r.stdout)
	}
	if rep.Source != "the environment" || len(rep.Servers) != 2 || rep.Servers[0].APIType != "AGGREGATED_DELTA_GRPC" ||
		rep.Servers[0].TLS["ca_certificate_file"] != pki.CAFile || len(rep.Authorities) != 2 ||
		rep.CertificateProviders["vault"].Error == "" || rep.CertificateProviders["default"].Error != "" ||
		!slices.Equal(rep.UnknownFields, []string{"node.clustr"}) {
		t.Errorf("-json report: %+v", rep)
	}
	var node struct{ ID, UserAgentName string }
	if err := json.Unmarshal(rep.Node, &node); err != nil || node.ID != "node-7" || node.UserAgentName != "goxds" {
		t.Errorf("-json node %s: %+v, %v", rep.Node, node, err)
	}
}

// An authority's fallback_on_reachability_only (gRFC A95) is reported as
// honoured with GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK=true, ignored
// without, and the node then advertises LbEndpointCollection support.
func TestBootstrapReportEndpointFallback(t *testing.T) {
	boot := `{"xds_servers": [{"server_uri": "xds:443", "channel_creds": [{"type": "insecure"}]}],
	  "authorities": {"ep.example.com": {"fallback_on_reachability_only": true}}}`
	path := writeFile(t, "bootstrap.json", []byte(boot))
	for _, tc := range []struct {
		env     []string
		want    string
		feature bool
	}{
		{nil, "    fallback_on_reachability_only: ignored, as GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK is not \"true\" (gRFC A95)\n", false},
		{[]string{"GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK=true"}, "    fallback_on_reachability_only: falls back as soon as its server cannot be reached, cached or not (gRFC A95)\n", true},
	} {
		r := goxds(t, runOpts{env: tc.env}, "bootstrap", path)
		if r.code != 0 {
			t.Fatalf("%v: exit %d; stderr %s", tc.env, r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, tc.want) {
			t.Errorf("%v: report lacks %q; report:\n%s", tc.env, tc.want, r.stdout)
		}
		if got := strings.Contains(r.stdout, "xds.endpoint.supports_lb_endpoint_collection"); got != tc.feature {
			t.Errorf("%v: node advertises LbEndpointCollection: %v, want %v; report:\n%s", tc.env, got, tc.feature, r.stdout)
		}
	}
}

// A bootstrap that does not load is one line naming the field, exit 1;
// a command line that gives none, exit 2.
func TestBootstrapErrors(t *testing.T) {
	for _, c := range []struct {
		name, content, want string
	}{
		{"no servers", `{"node": {"id": "n"}}`, "xds_servers"},
		{"bad uri", `{"xds_servers": [{"server_uri": 5, "channel_creds": [{"type": "insecure"}]}]}`, "xds_servers[0].server_uri: must be a string, got number"},
		{"no creds", `{"xds_servers": [{"server_uri": "x:1", "channel_creds": [{"type": "magic"}]}]}`, "channel_creds"},
		{"not json", `{"xds_servers": [`, "bootstrap"},
		{"missing tls file", `{"xds_servers": [{"server_uri": "x:1", "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "/nonexistent/ca.pem"}}]}]}`, "/nonexistent/ca.pem"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantOneLineError(t, goxds(t, runOpts{}, "bootstrap", writeFile(t, "b.json", []byte(c.content))), exitFailed, "bootstrap", c.want)
		})
	}
	wantOneLineError(t, goxds(t, runOpts{}, "bootstrap", filepath.Join(t.TempDir(), "missing.json")), exitFailed, "bootstrap", "missing.json")
	wantOneLineError(t, goxds(t, runOpts{}, "bootstrap"), exitBadInput, "bootstrap", "no bootstrap: give a file, or set GRPC_XDS_BOOTSTRAP or GRPC_XDS_BOOTSTRAP_CONFIG")
	wantOneLineError(t, goxds(t, runOpts{}, "bootstrap", "a.json", "b.json"), exitBadInput, "bootstrap", "one bootstrap file at most")
}
