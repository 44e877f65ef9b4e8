package resources

import (
	"fmt"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The benchmark resources of the SDS, RTDS, SRDS and VHDS types, sized like
// what a mesh control plane sends; the fuzz seed corpora hold smaller
// resources of the same shapes.

// pemBlock is a PEM-shaped block of n bytes of base64 filler.
func pemBlock(kind string, n int) string {
	body := strings.Repeat("MIIFazCCA1OgAwIBAgIUXj3Ld0bF", n/28+1)[:n]
	var b strings.Builder
	b.WriteString("-----BEGIN " + kind + "-----\n")
	for len(body) > 64 {
		b.WriteString(body[:64] + "\n")
		body = body[64:]
	}
	b.WriteString(body + "\n-----END " + kind + "-----\n")
	return b.String()
}

// benchSecret is a workload certificate as Istio's SDS sends it: a chain
// of two certificates and an EC private key, inline.
func benchSecret() *tlsv3.Secret {
	return &tlsv3.Secret{Name: "default", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inlineBytes(pemBlock("CERTIFICATE", 1400) + pemBlock("CERTIFICATE", 1300)),
		PrivateKey:       inlineBytes(pemBlock("EC PRIVATE KEY", 300)),
	}}}
}

// benchValidationSecret is a root CA bundle with SPIFFE SAN matchers.
func benchValidationSecret() *tlsv3.Secret {
	return validationSecret("ROOTCA", &tlsv3.CertificateValidationContext{
		TrustedCa: inlineBytes(pemBlock("CERTIFICATE", 1400)),
		MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{
			typedSAN(tlsv3.SubjectAltNameMatcher_URI, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://cluster.local/ns/prod/"}}),
			typedSAN(tlsv3.SubjectAltNameMatcher_URI, exact("spiffe://cluster.local/ns/istio-system/sa/istiod")),
		},
	})
}

// benchRuntime is a layer of 60 flags, nested up to three levels deep.
func benchRuntime() *runtimev3.Runtime {
	fields := map[string]any{}
	for i := 0; i < 5; i++ {
		group := map[string]any{}
		for j := 0; j < 10; j++ {
			switch j % 4 {
			case 0:
				group[fmt.Sprintf("flag_%d", j)] = j%8 == 0
			case 1:
				group[fmt.Sprintf("limit_%d", j)] = float64(100 * j)
			case 2:
				group[fmt.Sprintf("mode_%d", j)] = map[string]any{"name": "canary", "enabled": "true"}
			case 3:
				group[fmt.Sprintf("fraction_%d", j)] = map[string]any{"numerator": 25, "denominator": "HUNDRED"}
			}
		}
		fields[fmt.Sprintf("envoy.reloadable_features.group_%d", i)] = group
	}
	return &runtimev3.Runtime{Name: "rtds-layer", Layer: layer(fields)}
}

func benchScopedRouteConfig() *routev3.ScopedRouteConfiguration {
	return scopedRoute("scope-172.10.10.20", "route-config-172.10.10.20", "vip", "172.10.10.20")
}

// benchInlineScopedRouteConfig carries benchRouteConfig inline.
func benchInlineScopedRouteConfig() *routev3.ScopedRouteConfiguration {
	s := scopedRoute("scope-inline", "", "tenant-a")
	s.RouteConfiguration = benchRouteConfig()
	return s
}

// benchVirtualHost is one virtual host of benchRouteConfig's kind, named
// by the VHDS convention.
func benchVirtualHost() *routev3.VirtualHost {
	vh := &routev3.VirtualHost{
		Name:    "route-config/api.example.com",
		Domains: []string{"api.example.com", "*.api.example.com"},
	}
	for r := 0; r < 10; r++ {
		route := prefixRoute(fmt.Sprintf("/pkg.Service%d/", r), fmt.Sprintf("cluster-%d", r))
		switch r % 4 {
		case 1:
			route.Match.Headers = []*routev3.HeaderMatcher{
				{Name: "x-env", HeaderMatchSpecifier: stringMatch(exact("canary"))},
				{Name: "x-debug", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}},
			}
		case 2:
			route.Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: regexMatcher(fmt.Sprintf("/pkg.Service%d/Get[A-Z][a-z]+", r))}
		case 3:
			route.GetRoute().ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
				Clusters: []*routev3.WeightedCluster_ClusterWeight{cw("blue", 90), cw("green", 10)},
			}}
			route.Match.RuntimeFraction = fraction(50, typev3.FractionalPercent_HUNDRED)
		}
		route.GetRoute().HashPolicy = []*routev3.RouteAction_HashPolicy{headerHash("x-user", nil)}
		route.GetRoute().Timeout = durationpb.New(5 * time.Second)
		vh.Routes = append(vh.Routes, route)
	}
	vh.RetryPolicy = &routev3.RetryPolicy{RetryOn: "unavailable"}
	return vh
}

func BenchmarkDecodeSecret(b *testing.B) { benchDecode(b, SecretType, toAny(benchSecret())) }

func BenchmarkDecodeSecretValidationContext(b *testing.B) {
	benchDecode(b, SecretType, toAny(benchValidationSecret()))
}

func BenchmarkDecodeRuntime(b *testing.B) { benchDecode(b, RuntimeType, toAny(benchRuntime())) }

func BenchmarkDecodeScopedRouteConfig(b *testing.B) {
	benchDecode(b, ScopedRouteConfigType, toAny(benchScopedRouteConfig()))
}

func BenchmarkDecodeScopedRouteConfigInline(b *testing.B) {
	benchDecode(b, ScopedRouteConfigType, toAny(benchInlineScopedRouteConfig()))
}

func BenchmarkDecodeVirtualHost(b *testing.B) {
	benchDecode(b, VirtualHostType, toAny(benchVirtualHost()))
}

// The benchmark resources must themselves decode: a benchmark of an error
// path would measure the wrong thing.
func TestBenchMoreResourcesDecode(t *testing.T) {
	if _, s, err := decodeMsg(SecretType, benchSecret()); err != nil || len(s.TLSCertificate.PrivateKey.Inline()) < 300 {
		t.Errorf("secret: %v", err)
	}
	if _, s, err := decodeMsg(SecretType, benchValidationSecret()); err != nil || len(s.ValidationContext.SubjectAltNames) != 2 {
		t.Errorf("validation secret: %v", err)
	}
	if _, r, err := decodeMsg(RuntimeType, benchRuntime()); err != nil || len(r.Keys()) != 5*(3+3+2*2+2) {
		t.Errorf("runtime: %v (%d keys)", err, len(r.Keys()))
	}
	if _, s, err := decodeMsg(ScopedRouteConfigType, benchScopedRouteConfig()); err != nil || len(s.Key) != 2 {
		t.Errorf("scoped route config: %v", err)
	}
	if _, s, err := decodeMsg(ScopedRouteConfigType, benchInlineScopedRouteConfig()); err != nil || len(s.InlineRouteConfig.VirtualHosts) != 10 {
		t.Errorf("inline scoped route config: %v", err)
	}
	if _, v, err := decodeMsg(VirtualHostType, benchVirtualHost()); err != nil || len(v.VirtualHost.Routes) != 10 ||
		v.RouteConfigName() != "route-config" {
		t.Errorf("virtual host: %v", err)
	}
}
