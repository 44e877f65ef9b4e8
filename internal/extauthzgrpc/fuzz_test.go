package extauthzgrpc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// fuzzConfig is a filter configuration with the defaults.
func fuzzConfig(t testing.TB) *resources.ExtAuthzConfig {
	cfg, err := resources.NewExtAuthzConfig(nil, &extauthzv3.ExtAuthz{Services: &extauthzv3.ExtAuthz_GrpcService{GrpcService: &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{TargetUri: "dns:///authz:1"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// FuzzInterpretCheckResponse feeds arbitrary bytes as the authorization
// service's CheckResponse through the conversion and the data plane's
// interpretation: nothing panics, and an allowed request's changes never
// touch a pseudo-header or host. Seeds live in testdata/fuzz.
func FuzzInterpretCheckResponse(f *testing.F) {
	cfg := fuzzConfig(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		m := new(authv3.CheckResponse)
		if proto.Unmarshal(b, m) != nil {
			return
		}
		d, err := extauthz.Interpret(cfg, checkResponse(m))
		if err != nil {
			return
		}
		if d.Allow == (m.GetStatus().GetCode() != 0) || (!d.Allow && d.Code > 16) {
			t.Fatalf("decision %+v for status %v", d, m.GetStatus())
		}
		for _, ms := range [][]extauthz.Mutation{d.RequestHeaders, d.ResponseHeaders, d.Trailers} {
			for _, mu := range ms {
				if mu.Key == "host" || strings.HasPrefix(mu.Key, ":") || mu.Key == "" {
					t.Fatalf("mutation of %q", mu.Key)
				}
			}
		}
	})
}

// TestFuzzSeeds keeps the seeds what their names say: responses that
// allow, deny, or are malformed (reserved: a grpc- trailer on a denial,
// which gRFC A102 calls invalid), so the fuzzer starts past the decoder.
func TestFuzzSeeds(t *testing.T) {
	cfg := fuzzConfig(t)
	for name, wantErr := range map[string]bool{"ok": false, "denied": false, "malformed": true, "reserved": true} {
		data, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzInterpretCheckResponse", name))
		if err != nil {
			t.Fatal(err)
		}
		lit, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "go test fuzz v1\n[]byte(")
		if !ok {
			t.Fatalf("%s: not a fuzz seed", name)
		}
		b, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m := new(authv3.CheckResponse)
		if err := proto.Unmarshal([]byte(b), m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := extauthz.Interpret(cfg, checkResponse(m)); (err != nil) != wantErr {
			t.Errorf("%s: Interpret error %v, want error %v", name, err, wantErr)
		}
	}
}
