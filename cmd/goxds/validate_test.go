package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

const (
	ldsURL = "type.googleapis.com/envoy.config.listener.v3.Listener"
	cdsURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	rdsURL = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
)

// The example files: client and server Listeners judged one by one, the
// NACK's error_detail, and the exit status of a CI job.
func TestValidateTestdata(t *testing.T) {
	r := goxds(t, runOpts{}, "validate", "testdata/listeners.yaml", "testdata/cluster.json", "testdata/endpoints.txtpb")
	if r.code != exitFailed || r.stderr != "" {
		t.Errorf("exit %d, stderr %q; want 1 (a Listener is NACKed) and nothing on stderr", r.code, r.stderr)
	}
	const bad = `Listener "grpc/server?xds.resource.listening_address=0.0.0.0:9090": filter_chains[0].filters[0].typed_config.xff_num_trusted_hops: must be 0 (is 2)`
	for _, want := range []string{
		"testdata/listeners.yaml: 3 Listener resource(s) in YAML, version \"7\"\n",
		"  ACCEPTED \"client-listener\": client Listener (api_listener): routes from RDS \"client-routes\"; HTTP filters [router]\n",
		"  ACCEPTED \"grpc/server?xds.resource.listening_address=0.0.0.0:8080\": server Listener on 0.0.0.0:8080, 1 filter chain(s); chain plain: plaintext, routes from RDS \"server-routes\", HTTP filters [router]\n",
		"  NACKED   \"grpc/server?xds.resource.listening_address=0.0.0.0:9090\": " + bad + "\n",
		"  the response is NACKed; error_detail: " + bad + "\n",
		"testdata/cluster.json: 1 Cluster resource(s) in JSON\n  ACCEPTED \"backend\": EDS, endpoints \"backend-eds\", lb_policy round_robin in wrr_locality\n  the response is ACKed\n",
		"testdata/endpoints.txtpb: 1 ClusterLoadAssignment resource(s) in proto text, version \"3\"\n  ACCEPTED \"backend-eds\": 2 endpoint(s) in 1 locality(ies)\n  the response is ACKed\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q; output:\n%s", want, r.stdout)
		}
	}

	r = goxds(t, runOpts{}, "validate", "-type", "route", "testdata/route.yaml")
	if r.code != 0 || !strings.Contains(r.stdout, "ACCEPTED \"client-routes\": virtual host \"all\" [*]: 1 route(s); clusters [backend]\n") {
		t.Errorf("-type route: exit %d, output:\n%s%s", r.code, r.stdout, r.stderr)
	}

	// -q: only what is not accepted.
	r = goxds(t, runOpts{}, "validate", "-q", "testdata/listeners.yaml", "testdata/cluster.json")
	if r.code != exitFailed || strings.Contains(r.stdout, "ACCEPTED") || !strings.Contains(r.stdout, "  NACKED   \"grpc/server?xds.resource.listening_address=0.0.0.0:9090\"") ||
		!strings.Contains(r.stdout, "testdata/cluster.json: 1 Cluster resource(s) in JSON\n  the response is ACKed\n") {
		t.Errorf("-q: exit %d, output:\n%s", r.code, r.stdout)
	}

	// -json: one object per file.
	r = goxds(t, runOpts{}, "validate", "-json", "testdata/listeners.yaml", "testdata/cluster.json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != exitFailed || len(lines) != 2 {
		t.Fatalf("-json: exit %d, output:\n%s", r.code, r.stdout)
	}
	var lds, cds fileJSON
	if err := json.Unmarshal([]byte(lines[0]), &lds); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &cds); err != nil {
		t.Fatal(err)
	}
	if lds.Accepted || len(lds.Resources) != 3 || lds.Resources[2].Verdict != verdictNACKed || lds.Resources[2].Error != bad ||
		len(lds.NACKs) != 1 || lds.NACKs[0].ErrorDetail != bad || lds.Version != "7" || lds.TypeURL != ldsURL {
		t.Errorf("-json listeners: %+v", lds)
	}
	if !cds.Accepted || len(cds.Resources) != 1 || cds.Resources[0].Verdict != verdictAccepted || cds.Resources[0].Value == "" || len(cds.NACKs) != 0 {
		t.Errorf("-json cluster: %+v", cds)
	}
}

// One response in every format goxds reads files in, by extension and by
// content, from stdin, as one resource in an Any, and bare with -type.
func TestValidateFormats(t *testing.T) {
	cl := testutils.Cluster("c1", "c1-eds")
	resp := testutils.SotWResponse(cdsURL, "1", "", cl)
	dir := t.TempDir()
	var paths []string
	for _, name := range []string{"r.pb", "r.json", "r.yaml", "r.txtpb"} {
		path := filepath.Join(dir, name)
		if err := testutils.WriteResponseFile(path, resp); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
		// The same content under a name that says nothing.
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, writeFile(t, "noext-"+strings.TrimPrefix(filepath.Ext(name), "."), data))
	}
	for _, path := range paths {
		r := goxds(t, runOpts{}, "validate", path)
		if r.code != 0 || !strings.Contains(r.stdout, "  ACCEPTED \"c1\": EDS, endpoints \"c1-eds\"") {
			t.Errorf("%s: exit %d, output:\n%s%s", filepath.Base(path), r.code, r.stdout, r.stderr)
		}
	}
	yml, err := os.ReadFile(filepath.Join(dir, "r.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if r := goxds(t, runOpts{stdin: string(yml)}, "validate", "-"); r.code != 0 || !strings.Contains(r.stdout, "-: 1 Cluster resource(s) in YAML") {
		t.Errorf("stdin: exit %d, output:\n%s%s", r.code, r.stdout, r.stderr)
	}
	bare, err := proto.Marshal(cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, content string }{
		{"any.yaml", "\"@type\": " + cdsURL + "\nname: c1\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}, service_name: c1-eds}\n"},
		{"any.txtpb", "[" + cdsURL + "] { name: \"c1\" type: EDS eds_cluster_config { eds_config { ads {} } service_name: \"c1-eds\" } }\n"},
	} {
		if r := goxds(t, runOpts{}, "validate", writeFile(t, c.name, []byte(c.content))); r.code != 0 || !strings.Contains(r.stdout, "ACCEPTED \"c1\"") {
			t.Errorf("%s: exit %d, output:\n%s%s", c.name, r.code, r.stdout, r.stderr)
		}
	}
	if r := goxds(t, runOpts{}, "validate", "-type", "cds", writeFile(t, "bare.pb", bare)); r.code != 0 || !strings.Contains(r.stdout, "ACCEPTED \"c1\"") {
		t.Errorf("bare binary with -type: exit %d, output:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Files that hold no resources, or that cannot be read, are the command's
// mistake: one line, exit 2, and no verdicts.
func TestValidateInputErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no files", nil, "no files to validate"},
		{"missing file", []string{missing}, "missing.yaml: no such file"},
		{"bare without -type", []string{writeFile(t, "c.yaml", []byte("name: c1\n"))}, `(line 1:1 at name): unknown field "name" (one resource alone needs its "@type", or -type)`},
		{"bad Any", []string{writeFile(t, "a.json", []byte(`{"@type": "`+cdsURL+`", "nmae": "c1"}`))}, "one resource with its type: not an Any in JSON"},
		{"empty", []string{writeFile(t, "e.yaml", []byte("version_info: \"1\"\n"))}, "the YAML holds no resources"},
		{"garbage", []string{writeFile(t, "g", []byte("\xff\xfe\x00garbage"))}, "not a DiscoveryResponse in binary proto"},
		{"unknown type", []string{writeFile(t, "u.json", []byte(`{"@type": "type.googleapis.com/google.protobuf.Duration", "value": "1s"}`))}, "google.protobuf.Duration are not a type goxds decodes"},
		{"bad -type", []string{"-type", "frob", "testdata/route.yaml"}, `-type "frob": not a resource type goxds decodes`},
		{"bad -bootstrap", []string{"-bootstrap", missing, "testdata/route.yaml"}, "missing.yaml"},
		{"wrong type for file", []string{"-type", "cluster", "testdata/route.yaml"}, "not a Cluster in YAML"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := goxds(t, runOpts{}, append([]string{"validate"}, c.args...)...)
			wantOneLineError(t, r, exitBadInput, "validate", c.want)
			if r.stdout != "" {
				t.Errorf("verdicts printed for a bad command line:\n%s", r.stdout)
			}
		})
	}
}

// A resource whose name cannot be read is never used by a client that
// watches by name: said, and not counted as accepted.
func TestValidateUnnamedResource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.yaml")
	resp := testutils.SotWResponse(cdsURL, "1", "", testutils.Cluster("", "eds"), testutils.Cluster("c2", "eds"))
	if err := testutils.WriteResponseFile(path, resp); err != nil {
		t.Fatal(err)
	}
	r := goxds(t, runOpts{}, "validate", path)
	if r.code != exitFailed || !strings.Contains(r.stdout, "  UNNAMED  #0: ") || !strings.Contains(r.stdout, "  ACCEPTED \"c2\"") {
		t.Errorf("exit %d, output:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A name the response's resource_errors report (gRFC A88) is no NACK: the
// response is ACKed, and the name is said to be unusable, with the
// server's words.
func TestValidateResourceErrors(t *testing.T) {
	path := writeFile(t, "re.yaml", []byte("version_info: \"1\"\nresources:\n"+
		"- {\"@type\": "+cdsURL+", name: c1, type: EDS, eds_cluster_config: {eds_config: {ads: {}}}}\n"+
		"resource_errors:\n- resource_name: {name: c2}\n  error_detail: {code: 5, message: c2 is gone}\n"))
	r := goxds(t, runOpts{}, "validate", path)
	if r.code != exitFailed || !strings.Contains(r.stdout, "  ACCEPTED \"c1\"") || !strings.Contains(r.stdout, "  SERVER ERROR \"c2\": ") ||
		!strings.Contains(r.stdout, "c2 is gone") || !strings.Contains(r.stdout, "  the response is ACKed\n") || strings.Contains(r.stdout, "NACK") {
		t.Errorf("exit %d, output:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// xdstp:// names are watched through their authority: without a bootstrap
// any authority is made up for them; with one, an authority it lacks
// refuses the name, as a client of that bootstrap would.
func TestValidateAuthorities(t *testing.T) {
	name := "xdstp://corp.example.com/envoy.config.cluster.v3.Cluster/c1"
	path := filepath.Join(t.TempDir(), "r.json")
	if err := testutils.WriteResponseFile(path, testutils.SotWResponse(cdsURL, "1", "", testutils.Cluster(name, "eds"))); err != nil {
		t.Fatal(err)
	}
	if r := goxds(t, runOpts{}, "validate", path); r.code != 0 || !strings.Contains(r.stdout, "ACCEPTED \""+name+"\"") {
		t.Errorf("no bootstrap: exit %d, output:\n%s%s", r.code, r.stdout, r.stderr)
	}
	boot := writeFile(t, "b.json", testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "xds.example.com:443", NodeID: "n"}))
	r := goxds(t, runOpts{}, "validate", "-bootstrap", boot, path)
	if r.code != exitFailed || !strings.Contains(r.stdout, "  REFUSED  \""+name+"\": ") || !strings.Contains(r.stdout, "corp.example.com") {
		t.Errorf("bootstrap without the authority: exit %d, output:\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Beside a name the bootstrap serves, which is judged.
	mixed := filepath.Join(t.TempDir(), "r.json")
	if err := testutils.WriteResponseFile(mixed, testutils.SotWResponse(cdsURL, "1", "", testutils.Cluster(name, "eds"), testutils.Cluster("plain", "eds"))); err != nil {
		t.Fatal(err)
	}
	r = goxds(t, runOpts{}, "validate", "-bootstrap", boot, mixed)
	if r.code != exitFailed || !strings.Contains(r.stdout, "  REFUSED  \""+name+"\": ") || !strings.Contains(r.stdout, "  ACCEPTED \"plain\"") {
		t.Errorf("bootstrap without the authority, and a plain name: exit %d, output:\n%s%s", r.code, r.stdout, r.stderr)
	}
	boot = writeFile(t, "b.json", testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "xds.example.com:443", NodeID: "n",
		Authorities: map[string]testutils.BootstrapAuthority{"corp.example.com": {Servers: []testutils.BootstrapServer{{URI: "corp-xds:443"}}}}}))
	if r := goxds(t, runOpts{}, "validate", "-bootstrap", boot, path); r.code != 0 || !strings.Contains(r.stdout, "ACCEPTED \""+name+"\"") {
		t.Errorf("bootstrap with the authority: exit %d, output:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// The error_detail validate prints is, byte for byte, the one a goxds
// client sends a server for the same response: the client here NACKs to a
// fake server, which records the NACK.
func TestValidateErrorDetailIsTheClients(t *testing.T) {
	static := &clusterv3.Cluster{Name: "static", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	noLB := testutils.Cluster("nolb", "eds")
	noLB.LbPolicy = clusterv3.Cluster_LOAD_BALANCING_POLICY_CONFIG
	wrapped := &discoveryv3.Resource{Name: "wrapped-as-a", Version: "1", Resource: testutils.MarshalAny(testutils.Cluster("named-b", "eds"))}
	noAddr := &listenerv3.Listener{Name: "server-without-address", FilterChains: []*listenerv3.FilterChain{{Name: "x"}}}
	badAddr := &listenerv3.Listener{Name: "server-bad-port", Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
		SocketAddress: &corev3.SocketAddress{Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_NamedPort{NamedPort: "http"}}}}}
	for _, c := range []struct {
		name    string
		typeURL string
		res     []*anypb.Any
	}{
		{"one bad cluster", cdsURL, anys(static)},
		{"bad and good clusters", cdsURL, anys(static, testutils.Cluster("good", "eds"), noLB)},
		{"duplicate names", cdsURL, anys(testutils.Cluster("twice", "eds"), testutils.Cluster("twice", "other"))},
		{"wrapped under another name", cdsURL, []*anypb.Any{testutils.MarshalAny(wrapped)}},
		{"bad server listeners", ldsURL, anys(noAddr, badAddr, testutils.Listener("client", "routes"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := &discoveryv3.DiscoveryResponse{VersionInfo: "1", TypeUrl: c.typeURL, Resources: c.res}
			path := filepath.Join(t.TempDir(), "r.pb")
			if err := testutils.WriteResponseFile(path, resp); err != nil {
				t.Fatal(err)
			}
			r := goxds(t, runOpts{}, "validate", "-json", path)
			var got fileJSON
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != exitFailed || len(got.NACKs) != 1 {
				t.Fatalf("exit %d, output %s%s (%v); want one NACK", r.code, r.stdout, r.stderr, err)
			}
			want := clientErrorDetail(t, resp)
			if got.NACKs[0].ErrorDetail != want {
				t.Errorf("validate's error_detail:\n%s\nthe client's:\n%s", got.NACKs[0].ErrorDetail, want)
			}
		})
	}
}

func anys(msgs ...proto.Message) []*anypb.Any {
	out := make([]*anypb.Any, len(msgs))
	for i, m := range msgs {
		out[i] = testutils.MarshalAny(m)
	}
	return out
}

// clientErrorDetail has a goxds client, watching every resource of resp,
// receive resp from a fake server, and returns the error_detail of its
// NACK.
func clientErrorDetail(t *testing.T, resp *discoveryv3.DiscoveryResponse) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Stop()
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: fs.Address(), NodeID: "n"}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Logger: slog.New(slog.DiscardHandler), WatchExpiry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	typ, _ := resources.Lookup(resp.GetTypeUrl())
	names := make(map[string]bool)
	for _, a := range resp.GetResources() {
		if name, _ := resourceName(typ, a); name != "" && !names[name] {
			names[name] = true
			defer c.WatchResource(resp.GetTypeUrl(), name, client.WatcherFuncs[resources.Resource]{})()
		}
	}
	// Wait for the request naming them all, then answer it.
	for {
		req, err := fs.NextRequest(ctx)
		if err != nil {
			t.Fatalf("waiting for the client's request: %v", err)
		}
		if req.GetTypeUrl() == resp.GetTypeUrl() && len(req.GetResourceNames()) == len(names) {
			break
		}
	}
	sent := proto.Clone(resp).(*discoveryv3.DiscoveryResponse)
	sent.Nonce = "n1"
	if err := fs.Send(sent); err != nil {
		t.Fatal(err)
	}
	for {
		req, err := fs.NextRequest(ctx)
		if err != nil {
			t.Fatalf("waiting for the client's NACK: %v", err)
		}
		if req.GetTypeUrl() == resp.GetTypeUrl() && req.GetResponseNonce() == "n1" {
			if req.GetErrorDetail() == nil {
				t.Fatal("the client ACKed the response")
			}
			return req.GetErrorDetail().GetMessage()
		}
	}
}

// A route configuration requiring the RLS cluster specifier plugin is
// accepted, as a goxds gRPC channel's client accepts it, though the default
// registry of a client that routes no gRPC lacks the plugin.
func TestValidateAcceptsRLSRoutes(t *testing.T) {
	cfg, err := testutils.RouteLookupClusterSpecifier(`{"grpcKeybuilders": [{"names": [{"service": "s"}], "headers": [{"key": "k", "names": ["x-k"]}]}],
		"lookupService": "127.0.0.1:1", "defaultTarget": "c", "cacheSizeBytes": "1000"}`)
	if err != nil {
		t.Fatal(err)
	}
	rc := &routev3.RouteConfiguration{
		Name:                    "rls-routes",
		ClusterSpecifierPlugins: []*routev3.ClusterSpecifierPlugin{{Extension: &corev3.TypedExtensionConfig{Name: "rls", TypedConfig: cfg}}},
		VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_ClusterSpecifierPlugin{ClusterSpecifierPlugin: "rls"}}},
		}}}},
	}
	resp := &discoveryv3.DiscoveryResponse{VersionInfo: "1", TypeUrl: rdsURL, Resources: anys(rc)}
	path := filepath.Join(t.TempDir(), "rls.pb")
	if err := testutils.WriteResponseFile(path, resp); err != nil {
		t.Fatal(err)
	}
	r := goxds(t, runOpts{}, "validate", path)
	if r.code != 0 || !strings.Contains(r.stdout, `ACCEPTED "rls-routes"`) {
		t.Errorf("validate of a route configuration requiring RLS: exit %d, output:\n%s%s; want it accepted", r.code, r.stdout, r.stderr)
	}
}
