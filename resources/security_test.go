package resources

import (
	"reflect"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func provider(name, cert string) *tlsv3.CertificateProviderPluginInstance {
	return &tlsv3.CertificateProviderPluginInstance{InstanceName: name, CertificateName: cert}
}

func validationContext(vc *tlsv3.CertificateValidationContext) *tlsv3.CommonTlsContext_ValidationContext {
	return &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
}

func exactSAN(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

// TestSecurityConfig decodes clusters with each UpstreamTlsContext gRPC
// accepts or rejects, and checks the verdict and what was read.
func TestSecurityConfig(t *testing.T) {
	common := func(c *tlsv3.CommonTlsContext) *tlsv3.UpstreamTlsContext {
		return &tlsv3.UpstreamTlsContext{CommonTlsContext: c}
	}
	roots := func(vc *tlsv3.CertificateValidationContext) *tlsv3.CertificateValidationContext {
		vc.CaCertificateProviderInstance = provider("roots", "r")
		return vc
	}
	tests := []struct {
		name    string
		tls     *tlsv3.UpstreamTlsContext
		want    SecurityConfig // compared on every field but SANMatchers, whose String()s are in sans
		sans    []string
		wantErr string
	}{
		{name: "roots only (TLS)",
			tls:  common(&tlsv3.CommonTlsContext{ValidationContextType: validationContext(roots(&tlsv3.CertificateValidationContext{}))}),
			want: SecurityConfig{RootInstance: "roots", RootCertName: "r"}},
		{name: "mTLS with every SAN matcher kind",
			tls: common(&tlsv3.CommonTlsContext{
				TlsCertificateProviderInstance: provider("id", "i"),
				ValidationContextType: validationContext(roots(&tlsv3.CertificateValidationContext{MatchSubjectAltNames: []*matcherv3.StringMatcher{
					exactSAN("a.example"),
					{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://td/"}},
					{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ".example"}, IgnoreCase: true},
					{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "mid"}},
					{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "b[0-9]+"}}},
				}})),
			}),
			want: SecurityConfig{RootInstance: "roots", RootCertName: "r", IdentityInstance: "id", IdentityCertName: "i"},
			sans: []string{`exact:"a.example"`, `prefix:"spiffe://td/"`, `suffix:".example" (ignore case)`, `contains:"mid"`, `safe_regex:"b[0-9]+"`}},
		{name: "combined validation context",
			tls: common(&tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
				CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
					DefaultValidationContext: roots(&tlsv3.CertificateValidationContext{MatchSubjectAltNames: []*matcherv3.StringMatcher{exactSAN("x")}}),
				}}}),
			want: SecurityConfig{RootInstance: "roots", RootCertName: "r"}, sans: []string{`exact:"x"`}},
		{name: "deprecated fields",
			tls: common(&tlsv3.CommonTlsContext{
				TlsCertificateCertificateProviderInstance: &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: "id", CertificateName: "i"},
				ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
					CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
						DefaultValidationContext:                     &tlsv3.CertificateValidationContext{MatchSubjectAltNames: []*matcherv3.StringMatcher{exactSAN("x")}},
						ValidationContextCertificateProviderInstance: &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: "roots", CertificateName: "r"},
					}}}),
			want: SecurityConfig{RootInstance: "roots", RootCertName: "r", IdentityInstance: "id", IdentityCertName: "i"}, sans: []string{`exact:"x"`}},
		{name: "deprecated validation provider field",
			tls: common(&tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextCertificateProviderInstance{
				ValidationContextCertificateProviderInstance: &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: "roots"}}}),
			want: SecurityConfig{RootInstance: "roots"}},
		{name: "system roots",
			tls:  common(&tlsv3.CommonTlsContext{ValidationContextType: validationContext(&tlsv3.CertificateValidationContext{SystemRootCerts: &tlsv3.CertificateValidationContext_SystemRootCerts{}})}),
			want: SecurityConfig{UseSystemRoots: true}},
		{name: "sni, auto_host_sni, auto_sni_san_validation",
			tls: &tlsv3.UpstreamTlsContext{Sni: "svc.example", AutoHostSni: true, AutoSniSanValidation: true,
				CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: validationContext(roots(&tlsv3.CertificateValidationContext{}))}},
			want: SecurityConfig{RootInstance: "roots", RootCertName: "r", SNI: "svc.example", AutoHostSNI: true, AutoSNISANValidation: true}},
		{name: "ignored fields",
			tls: &tlsv3.UpstreamTlsContext{AllowRenegotiation: true, MaxSessionKeys: wrapperspb.UInt32(3),
				CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: []string{"h2"}, ValidationContextType: validationContext(roots(&tlsv3.CertificateValidationContext{
					TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/ca.pem"}}, AllowExpiredCertificate: true,
				}))}},
			want: SecurityConfig{RootInstance: "roots", RootCertName: "r"}},

		{name: "no common_tls_context", tls: &tlsv3.UpstreamTlsContext{Sni: "x"},
			wantErr: "transport_socket.typed_config.common_tls_context: missing"},
		{name: "no roots", tls: common(&tlsv3.CommonTlsContext{TlsCertificateProviderInstance: provider("id", "")}),
			wantErr: "common_tls_context.validation_context.ca_certificate_provider_instance: missing"},
		{name: "validation context without roots", tls: common(&tlsv3.CommonTlsContext{ValidationContextType: validationContext(&tlsv3.CertificateValidationContext{})}),
			wantErr: "ca_certificate_provider_instance: missing"},
		{name: "tls_params", tls: common(&tlsv3.CommonTlsContext{TlsParams: &tlsv3.TlsParameters{}}),
			wantErr: "common_tls_context.tls_params: not supported"},
		{name: "custom_handshaker", tls: common(&tlsv3.CommonTlsContext{CustomHandshaker: &corev3.TypedExtensionConfig{Name: "h"}}),
			wantErr: "common_tls_context.custom_handshaker: not supported"},
		{name: "inline certificates", tls: common(&tlsv3.CommonTlsContext{TlsCertificates: []*tlsv3.TlsCertificate{{}}}),
			wantErr: "common_tls_context.tls_certificates: not supported"},
		{name: "SDS certificates", tls: common(&tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "s"}}}),
			wantErr: "common_tls_context.tls_certificate_sds_secret_configs: not supported"},
		{name: "SDS validation context", tls: common(&tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{
			ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: "s"}}}),
			wantErr: "common_tls_context.validation_context_type: *tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig not supported"},
		{name: "spki pinning", tls: common(&tlsv3.CommonTlsContext{ValidationContextType: validationContext(roots(&tlsv3.CertificateValidationContext{VerifyCertificateSpki: []string{"x"}}))}),
			wantErr: "common_tls_context.validation_context.verify_certificate_spki: not supported"},
		{name: "hash pinning", tls: common(&tlsv3.CommonTlsContext{ValidationContextType: validationContext(roots(&tlsv3.CertificateValidationContext{VerifyCertificateHash: []string{"x"}}))}),
			wantErr: "validation_context.verify_certificate_hash: not supported"},
		{name: "signed certificate timestamp", tls: common(&tlsv3.CommonTlsContext{ValidationContextType: validationContext(roots(&tlsv3.CertificateValidationContext{RequireSignedCertificateTimestamp: wrapperspb.Bool(true)}))}),
			wantErr: "validation_context.require_signed_certificate_timestamp: not supported"},
		{name: "crl", tls: common(&tlsv3.CommonTlsContext{ValidationContextType: validationContext(roots(&tlsv3.CertificateValidationContext{Crl: &corev3.DataSource{}}))}),
			wantErr: "validation_context.crl: not supported"},
		{name: "custom validator", tls: common(&tlsv3.CommonTlsContext{ValidationContextType: validationContext(roots(&tlsv3.CertificateValidationContext{CustomValidatorConfig: &corev3.TypedExtensionConfig{Name: "v"}}))}),
			wantErr: "validation_context.custom_validator_config: not supported"},
		{name: "bad SAN regex", tls: common(&tlsv3.CommonTlsContext{ValidationContextType: validationContext(roots(&tlsv3.CertificateValidationContext{MatchSubjectAltNames: []*matcherv3.StringMatcher{
			exactSAN("ok"), {MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "("}}}}}))}),
			wantErr: "validation_context.match_subject_alt_names[1]:"},
		{name: "empty SAN prefix", tls: common(&tlsv3.CommonTlsContext{ValidationContextType: validationContext(roots(&tlsv3.CertificateValidationContext{MatchSubjectAltNames: []*matcherv3.StringMatcher{
			{MatchPattern: &matcherv3.StringMatcher_Prefix{}}}}))}),
			wantErr: "validation_context.match_subject_alt_names[0]: empty prefix pattern"},
		{name: "SNI too long", tls: &tlsv3.UpstreamTlsContext{Sni: strings.Repeat("a", 256), CommonTlsContext: &tlsv3.CommonTlsContext{
			ValidationContextType: validationContext(roots(&tlsv3.CertificateValidationContext{}))}},
			wantErr: "transport_socket.typed_config.sni: 256 bytes, longer than 255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := edsCluster("c", "svc")
			in.TransportSocket = tlsSocket(tt.tls)
			_, c, err := decodeMsg(ClusterType, in)
			checkErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			got := *c.Security
			var sans []string
			for _, m := range got.SANMatchers {
				sans = append(sans, m.String())
			}
			got.SANMatchers = nil
			if !reflect.DeepEqual(got, tt.want) || strings.Join(sans, "|") != strings.Join(tt.sans, "|") {
				t.Errorf("Security = %+v, SANs %q; want %+v, SANs %q", got, sans, tt.want, tt.sans)
			}
			if c.TLS == nil {
				t.Error("TLS (raw) not kept")
			}
		})
	}
	// No transport socket: plaintext, no security config.
	_, c, err := decodeMsg(ClusterType, edsCluster("c", "svc"))
	if err != nil || c.Security != nil || c.TLS != nil {
		t.Errorf("plaintext cluster: Security %+v, TLS %v, err %v", c.Security, c.TLS, err)
	}
}
