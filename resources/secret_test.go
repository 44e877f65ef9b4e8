package resources

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// testKey stands for private key material: it must never show in an
// error or a printed value.
const testKey = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END PRIVATE KEY-----"

func inlineBytes(b string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte(b)}}
}

func inlineString(s string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}
}

func fileSource(name string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: name}}
}

func envSource(name string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_EnvironmentVariable{EnvironmentVariable: name}}
}

func certSecret(name string) *tlsv3.Secret {
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inlineBytes("-----BEGIN CERTIFICATE-----"),
		PrivateKey:       inlineBytes(testKey),
	}}}
}

func validationSecret(name string, vc *tlsv3.CertificateValidationContext) *tlsv3.Secret {
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: vc}}
}

func typedSAN(t tlsv3.SubjectAltNameMatcher_SanType, m *matcherv3.StringMatcher) *tlsv3.SubjectAltNameMatcher {
	return &tlsv3.SubjectAltNameMatcher{SanType: t, Matcher: m}
}

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

func TestDecodeSecretRules(t *testing.T) {
	cert := func(edit func(c *tlsv3.TlsCertificate)) func(s *tlsv3.Secret) {
		return func(s *tlsv3.Secret) { edit(s.GetTlsCertificate()) }
	}
	vc := func(edit func(vc *tlsv3.CertificateValidationContext)) func(s *tlsv3.Secret) {
		return func(s *tlsv3.Secret) {
			c := &tlsv3.CertificateValidationContext{TrustedCa: fileSource("/ca.pem")}
			edit(c)
			s.Type = &tlsv3.Secret_ValidationContext{ValidationContext: c}
		}
	}
	keys := func(ks ...*corev3.DataSource) func(s *tlsv3.Secret) {
		return func(s *tlsv3.Secret) {
			s.Type = &tlsv3.Secret_SessionTicketKeys{SessionTicketKeys: &tlsv3.TlsSessionTicketKeys{Keys: ks}}
		}
	}
	generic := func(g *tlsv3.GenericSecret) func(s *tlsv3.Secret) {
		return func(s *tlsv3.Secret) { s.Type = &tlsv3.Secret_GenericSecret{GenericSecret: g} }
	}
	tests := []struct {
		name    string
		edit    func(s *tlsv3.Secret)
		wantErr string
	}{
		{name: "tls certificate inline"},
		{name: "empty name", edit: func(s *tlsv3.Secret) { s.Name = "" }, wantErr: "name: must not be empty"},
		{name: "no secret", edit: func(s *tlsv3.Secret) { s.Type = nil }, wantErr: "no secret (want one of tls_certificate"},

		// tls_certificate and the DataSource rules.
		{name: "certificate from files", edit: cert(func(c *tlsv3.TlsCertificate) {
			c.CertificateChain, c.PrivateKey = fileSource("/cert.pem"), fileSource("/key.pem")
		})},
		{name: "certificate from strings and the environment", edit: cert(func(c *tlsv3.TlsCertificate) {
			c.CertificateChain, c.PrivateKey = inlineString("-----BEGIN CERTIFICATE-----"), envSource("TLS_KEY")
		})},
		{name: "no certificate chain", edit: cert(func(c *tlsv3.TlsCertificate) { c.CertificateChain = nil }),
			wantErr: "tls_certificate.certificate_chain: missing"},
		{name: "no private key", edit: cert(func(c *tlsv3.TlsCertificate) { c.PrivateKey = nil }),
			wantErr: "tls_certificate.private_key: missing"},
		{name: "data source without specifier", edit: cert(func(c *tlsv3.TlsCertificate) { c.PrivateKey = &corev3.DataSource{} }),
			wantErr: "tls_certificate.private_key: no specifier"},
		{name: "empty inline bytes", edit: cert(func(c *tlsv3.TlsCertificate) { c.PrivateKey = inlineBytes("") }),
			wantErr: "tls_certificate.private_key.inline_bytes: must not be empty"},
		{name: "empty inline string", edit: cert(func(c *tlsv3.TlsCertificate) { c.CertificateChain = inlineString("") }),
			wantErr: "tls_certificate.certificate_chain.inline_string: must not be empty"},
		{name: "empty filename", edit: cert(func(c *tlsv3.TlsCertificate) { c.PrivateKey = fileSource("") }),
			wantErr: "tls_certificate.private_key.filename: must not be empty"},
		{name: "empty environment variable", edit: cert(func(c *tlsv3.TlsCertificate) { c.PrivateKey = envSource("") }),
			wantErr: "tls_certificate.private_key.environment_variable: must not be empty"},
		{name: "pkcs12", edit: cert(func(c *tlsv3.TlsCertificate) { c.Pkcs12 = fileSource("/bundle.p12") }),
			wantErr: "tls_certificate.pkcs12: not supported"},
		{name: "private key provider instead of a key", edit: cert(func(c *tlsv3.TlsCertificate) {
			c.PrivateKey, c.PrivateKeyProvider = nil, &tlsv3.PrivateKeyProvider{ProviderName: "qat"}
		}), wantErr: "tls_certificate.private_key_provider: not supported (want private_key)"},
		{name: "private key provider next to a key", edit: cert(func(c *tlsv3.TlsCertificate) {
			c.PrivateKeyProvider = &tlsv3.PrivateKeyProvider{ProviderName: "qat"}
		})},

		// validation_context.
		{name: "validation context", edit: vc(func(*tlsv3.CertificateValidationContext) {})},
		{name: "validation context without a CA", edit: vc(func(c *tlsv3.CertificateValidationContext) {
			c.TrustedCa = nil
			c.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{typedSAN(tlsv3.SubjectAltNameMatcher_DNS, exact("a.com"))}
		})},
		{name: "bad trusted ca", edit: vc(func(c *tlsv3.CertificateValidationContext) { c.TrustedCa = inlineString("") }),
			wantErr: "validation_context.trusted_ca.inline_string: must not be empty"},
		{name: "typed SAN matchers", edit: vc(func(c *tlsv3.CertificateValidationContext) {
			c.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{
				typedSAN(tlsv3.SubjectAltNameMatcher_URI, exact("spiffe://td/ns/a/sa/b")),
				{SanType: tlsv3.SubjectAltNameMatcher_OTHER_NAME, Oid: "1.3.6.1.4.1.311.20.2.3", Matcher: exact("u@x")},
			}
		})},
		{name: "typed SAN without type", edit: vc(func(c *tlsv3.CertificateValidationContext) {
			c.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{typedSAN(tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED, exact("a"))}
		}), wantErr: "validation_context.match_typed_subject_alt_names[0].san_type: must be set"},
		{name: "typed SAN of unknown type", edit: vc(func(c *tlsv3.CertificateValidationContext) {
			c.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{typedSAN(99, exact("a"))}
		}), wantErr: "match_typed_subject_alt_names[0].san_type: unknown type 99"},
		{name: "other name without oid", edit: vc(func(c *tlsv3.CertificateValidationContext) {
			c.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{typedSAN(tlsv3.SubjectAltNameMatcher_OTHER_NAME, exact("a"))}
		}), wantErr: "match_typed_subject_alt_names[0].oid: must be set for an OTHER_NAME matcher"},
		{name: "typed SAN without matcher", edit: vc(func(c *tlsv3.CertificateValidationContext) {
			c.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{typedSAN(tlsv3.SubjectAltNameMatcher_DNS, nil)}
		}), wantErr: "match_typed_subject_alt_names[0].matcher: missing"},
		{name: "typed SAN bad regex", edit: vc(func(c *tlsv3.CertificateValidationContext) {
			c.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{typedSAN(tlsv3.SubjectAltNameMatcher_DNS,
				&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: regexMatcher("(")}})}
		}), wantErr: "match_typed_subject_alt_names[0].matcher: invalid regex"},
		{name: "untyped SAN matchers", edit: vc(func(c *tlsv3.CertificateValidationContext) {
			c.MatchSubjectAltNames = []*matcherv3.StringMatcher{exact("a.com")}
		})},
		{name: "untyped SAN with an empty prefix", edit: vc(func(c *tlsv3.CertificateValidationContext) {
			c.MatchSubjectAltNames = []*matcherv3.StringMatcher{exact("a"), {MatchPattern: &matcherv3.StringMatcher_Prefix{}}}
		}), wantErr: "validation_context.match_subject_alt_names[1]: empty prefix pattern"},
		{name: "typed SANs replace untyped ones", edit: vc(func(c *tlsv3.CertificateValidationContext) {
			c.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{typedSAN(tlsv3.SubjectAltNameMatcher_DNS, exact("a.com"))}
			c.MatchSubjectAltNames = []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Prefix{}}}
		})},

		// session_ticket_keys.
		{name: "session ticket keys", edit: keys(inlineBytes("k1"), fileSource("/k2"))},
		{name: "no session ticket keys", edit: keys(), wantErr: "session_ticket_keys.keys: must not be empty"},
		{name: "bad session ticket key", edit: keys(inlineBytes("k1"), inlineBytes("")),
			wantErr: "session_ticket_keys.keys[1].inline_bytes: must not be empty"},

		// generic_secret.
		{name: "generic secret", edit: generic(&tlsv3.GenericSecret{Secret: inlineString("token")})},
		{name: "generic secrets", edit: generic(&tlsv3.GenericSecret{Secrets: map[string]*corev3.DataSource{
			"user": inlineString("u"), "password": inlineBytes(testKey),
		}})},
		{name: "generic secret empty", edit: generic(&tlsv3.GenericSecret{}),
			wantErr: "generic_secret: neither secret nor secrets is set"},
		{name: "generic secret both", edit: generic(&tlsv3.GenericSecret{
			Secret: inlineString("a"), Secrets: map[string]*corev3.DataSource{"b": inlineString("b")},
		}), wantErr: "generic_secret: both secret and secrets are set"},
		{name: "generic secret bad value", edit: generic(&tlsv3.GenericSecret{Secret: &corev3.DataSource{}}),
			wantErr: "generic_secret.secret: no specifier"},
		{name: "generic secrets bad value", edit: generic(&tlsv3.GenericSecret{Secrets: map[string]*corev3.DataSource{
			"a": inlineString("a"), "z": inlineString(""), "b": nil,
		}}), wantErr: `generic_secret.secrets["b"]: no specifier`},
		{name: "generic secrets empty name", edit: generic(&tlsv3.GenericSecret{Secrets: map[string]*corev3.DataSource{
			"": inlineString("a"),
		}}), wantErr: `generic_secret.secrets[""]: empty name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := certSecret("sec")
			if tt.edit != nil {
				tt.edit(s)
			}
			name, v, err := decodeMsg(SecretType, s)
			checkErr(t, err, tt.wantErr)
			if name != s.GetName() {
				t.Errorf("name = %q, want %q", name, s.GetName())
			}
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Errorf("error %v does not wrap a *FieldError", err)
				}
				if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "c2VjcmV0") {
					t.Errorf("error %q shows the private key", err)
				}
				return
			}
			if v.Raw == nil || v.Name != "sec" {
				t.Errorf("value = %v, want Name and Raw set", v)
			}
		})
	}
}

func TestDecodeSecretValue(t *testing.T) {
	_, s, err := decodeMsg(SecretType, certSecret("server-cert"))
	if err != nil {
		t.Fatal(err)
	}
	if s.ResourceName() != "server-cert" || s.Proto() != s.Raw || s.Kind != SecretTLSCertificate ||
		s.ValidationContext != nil || s.SessionTicketKeys != nil || s.GenericSecret != nil {
		t.Fatalf("secret = %v, want only a TLS certificate", s)
	}
	c := s.TLSCertificate
	if c.CertificateChain.Kind() != DataSourceInlineBytes || string(c.CertificateChain.Inline()) != "-----BEGIN CERTIFICATE-----" {
		t.Errorf("certificate chain = %v", c.CertificateChain)
	}
	if c.PrivateKey.Kind() != DataSourceInlineBytes || string(c.PrivateKey.Inline()) != testKey {
		t.Errorf("private key = %v", c.PrivateKey)
	}

	vc := &tlsv3.CertificateValidationContext{
		TrustedCa:       inlineString("-----BEGIN CERTIFICATE-----"),
		SystemRootCerts: &tlsv3.CertificateValidationContext_SystemRootCerts{},
		MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{
			typedSAN(tlsv3.SubjectAltNameMatcher_DNS, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ".example.com"}, IgnoreCase: true}),
			{SanType: tlsv3.SubjectAltNameMatcher_OTHER_NAME, Oid: "1.2.3", Matcher: exact("x")},
		},
	}
	_, s, err = decodeMsg(SecretType, validationSecret("ca", vc))
	if err != nil {
		t.Fatal(err)
	}
	v := s.ValidationContext
	if s.Kind != SecretValidationContext || v.Raw == nil || !v.SystemRootCerts || v.TrustedCA == nil ||
		v.TrustedCA.Kind() != DataSourceInlineString || string(v.TrustedCA.Inline()) != "-----BEGIN CERTIFICATE-----" {
		t.Fatalf("validation context = %+v", v)
	}
	if len(v.SubjectAltNames) != 2 {
		t.Fatalf("got %d SAN matchers", len(v.SubjectAltNames))
	}
	dns, other := v.SubjectAltNames[0], v.SubjectAltNames[1]
	if dns.Type != tlsv3.SubjectAltNameMatcher_DNS || !dns.Matcher.Match("A.Example.COM") || dns.Matcher.Match("example.org") {
		t.Errorf("DNS matcher = %+v", dns)
	}
	if other.Type != tlsv3.SubjectAltNameMatcher_OTHER_NAME || other.OID != "1.2.3" || !other.Matcher.Match("x") {
		t.Errorf("other-name matcher = %+v", other)
	}

	_, s, err = decodeMsg(SecretType, validationSecret("legacy", &tlsv3.CertificateValidationContext{
		MatchSubjectAltNames: []*matcherv3.StringMatcher{exact("a.com")},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if v := s.ValidationContext; v.TrustedCA != nil || v.SystemRootCerts || len(v.SubjectAltNames) != 1 ||
		v.SubjectAltNames[0].Type != tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED || !v.SubjectAltNames[0].Matcher.Match("a.com") {
		t.Errorf("untyped matchers = %+v", v)
	}

	_, s, err = decodeMsg(SecretType, &tlsv3.Secret{Name: "stek", Type: &tlsv3.Secret_SessionTicketKeys{
		SessionTicketKeys: &tlsv3.TlsSessionTicketKeys{Keys: []*corev3.DataSource{envSource("STEK"), fileSource("/stek")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if k := s.SessionTicketKeys; s.Kind != SecretSessionTicketKeys || len(k) != 2 ||
		k[0].EnvironmentVariable() != "STEK" || k[0].Filename() != "" || k[1].Filename() != "/stek" || k[1].Inline() != nil {
		t.Errorf("session ticket keys = %v", k)
	}

	_, s, err = decodeMsg(SecretType, &tlsv3.Secret{Name: "g", Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{
		Secrets: map[string]*corev3.DataSource{"user": inlineString("admin"), "password": inlineBytes("hunter2")},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if g := s.GenericSecret; s.Kind != SecretGeneric || g.Secret != nil || len(g.Secrets) != 2 ||
		string(g.Secrets["user"].Inline()) != "admin" || string(g.Secrets["password"].Inline()) != "hunter2" {
		t.Errorf("generic secret = %v", g)
	}
}

// A private key must not reach a log through any way of printing a decoded
// secret, nor through an error.
func TestSecretNeverShowsSecretMaterial(t *testing.T) {
	generic := &tlsv3.Secret{Name: "g", Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{
		Secrets: map[string]*corev3.DataSource{"password": inlineString(testKey)},
	}}}
	single := &tlsv3.Secret{Name: "one", Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{Secret: inlineBytes(testKey)}}}
	stek := &tlsv3.Secret{Name: "stek", Type: &tlsv3.Secret_SessionTicketKeys{
		SessionTicketKeys: &tlsv3.TlsSessionTicketKeys{Keys: []*corev3.DataSource{inlineBytes(testKey)}},
	}}
	for _, m := range []*tlsv3.Secret{certSecret("cert"), generic, single, stek} {
		_, s, err := decodeMsg(SecretType, m)
		if err != nil {
			t.Fatal(err)
		}
		var values []any = []any{s}
		if c := s.TLSCertificate; c != nil {
			values = append(values, c, *c, c.PrivateKey, &c.PrivateKey)
		}
		if g := s.GenericSecret; g != nil {
			values = append(values, g, *g, g.Secrets)
		}
		if k := s.SessionTicketKeys; k != nil {
			values = append(values, k)
		}
		var buf bytes.Buffer
		text := slog.New(slog.NewTextHandler(&buf, nil))
		json := slog.New(slog.NewJSONHandler(&buf, nil))
		for _, v := range values {
			for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
				fmt.Fprintf(&buf, verb+"\n", v)
			}
			fmt.Fprintln(&buf, v)
			text.Info("secret", "value", v)
			json.Info("secret", "value", v)
		}
		out := buf.String()
		for _, leak := range []string{testKey, "c2VjcmV0", fmt.Sprintf("%x", testKey[:8]), "45 45 45 45 45"} {
			if strings.Contains(out, leak) {
				t.Fatalf("%s: printed output shows the key (%q):\n%s", s.Name, leak, out)
			}
		}
	}
	_, s, _ := decodeMsg(SecretType, certSecret("server-cert"))
	want := fmt.Sprintf(`Secret "server-cert": tls_certificate {certificate_chain: inline_bytes (27 bytes), private_key: inline_bytes (%d bytes)}`, len(testKey))
	if got := fmt.Sprint(s); got != want {
		t.Errorf("Sprint = %s\nwant    %s", got, want)
	}
}

func TestSecretString(t *testing.T) {
	tests := []struct {
		m    *tlsv3.Secret
		want string
	}{
		{validationSecret("ca", &tlsv3.CertificateValidationContext{
			TrustedCa: fileSource("/ca.pem"), SystemRootCerts: &tlsv3.CertificateValidationContext_SystemRootCerts{},
			MatchSubjectAltNames: []*matcherv3.StringMatcher{exact("a")},
		}), `Secret "ca": validation_context {trusted_ca: filename "/ca.pem", system_root_certs, 1 SAN matchers}`},
		{&tlsv3.Secret{Name: "k", Type: &tlsv3.Secret_SessionTicketKeys{
			SessionTicketKeys: &tlsv3.TlsSessionTicketKeys{Keys: []*corev3.DataSource{envSource("K")}},
		}}, `Secret "k": session_ticket_keys (1 keys)`},
		{&tlsv3.Secret{Name: "g", Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{
			Secrets: map[string]*corev3.DataSource{"b": envSource("B"), "a": inlineString("x")},
		}}}, `Secret "g": generic_secret {secrets: a, b}`},
		{&tlsv3.Secret{Name: "g1", Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{Secret: envSource("TOKEN")}}},
			`Secret "g1": generic_secret {secret: environment_variable "TOKEN"}`},
	}
	for _, tt := range tests {
		_, s, err := decodeMsg(SecretType, tt.m)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.String(); got != tt.want {
			t.Errorf("String = %s\nwant     %s", got, tt.want)
		}
	}
	var nilSecret *Secret
	if got := fmt.Sprint(nilSecret); got != "Secret(nil)" {
		t.Errorf("nil secret prints %q", got)
	}
	if got := fmt.Sprint(DataSource{}); got != `filename ""` {
		t.Errorf("zero DataSource prints %q", got)
	}
	for k, want := range map[fmt.Stringer]string{
		SecretKind(9): "SecretKind(9)", DataSourceKind(9): "DataSourceKind(9)",
		SecretGeneric: "generic_secret", DataSourceEnvironmentVariable: "environment_variable",
	} {
		if got := k.String(); got != want {
			t.Errorf("String = %q, want %q", got, want)
		}
	}
}

func TestDecodeSecretGarbage(t *testing.T) {
	name, _, err := SecretType.DecodeTyped(nil, &anypb.Any{TypeUrl: SecretTypeURL, Value: []byte{0x0a, 0xff}})
	checkErr(t, err, "Secret: unmarshal Secret")
	if name != "" {
		t.Errorf("name = %q for unreadable bytes", name)
	}
	_, _, err = SecretType.DecodeTyped(nil, &anypb.Any{TypeUrl: RuntimeTypeURL})
	checkErr(t, err, `want "`+SecretTypeURL+`"`)
}
