package resources

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// SecretType is the built-in SDS type: Secret resources, decoded into
// *Secret. Secrets are fetched by name; a SotW response need not carry all
// of them, and there is no wildcard.
var SecretType = NewType(TypeOptions[*Secret]{
	TypeURL: SecretTypeURL,
	Decode:  decodeSecret,
})

// SecretKind says which kind of secret a Secret holds.
type SecretKind int

const (
	// SecretTLSCertificate is a certificate chain and its private key.
	SecretTLSCertificate SecretKind = iota
	// SecretValidationContext is how to validate a peer's certificate.
	SecretValidationContext
	// SecretSessionTicketKeys are TLS session ticket keys.
	SecretSessionTicketKeys
	// SecretGeneric is an opaque secret for filters.
	SecretGeneric
)

// String returns the SecretKind as text, for logs and errors.
func (k SecretKind) String() string {
	switch k {
	case SecretTLSCertificate:
		return "tls_certificate"
	case SecretValidationContext:
		return "validation_context"
	case SecretSessionTicketKeys:
		return "session_ticket_keys"
	case SecretGeneric:
		return "generic_secret"
	}
	return "SecretKind(" + strconv.Itoa(int(k)) + ")"
}

// Secret is a validated SDS Secret. Exactly one of TLSCertificate,
// ValidationContext, SessionTicketKeys and GenericSecret is set, as Kind
// says. Like every decoded value it is immutable and shared: callers must
// not modify it.
//
// A Secret prints (with fmt, any verb, or slog) without the contents of
// its data sources, and decode errors never quote them, so secrets can be
// logged. Raw is the exception: it is the message as received, private key
// included, and must never be logged or marshalled.
type Secret struct {
	// Name is the resource name.
	Name string
	// Kind says which of the fields below is set.
	Kind SecretKind
	// TLSCertificate is a certificate chain with its private key.
	TLSCertificate *TLSCertificate
	// ValidationContext validates peer certificates.
	ValidationContext *ValidationContext
	// SessionTicketKeys are the keys in order (never empty); the first
	// encrypts new tickets.
	SessionTicketKeys []DataSource
	// GenericSecret is an opaque secret.
	GenericSecret *GenericSecret
	// Raw is the message as received, secret material included.
	Raw *tlsv3.Secret
}

// TLSCertificate is a certificate chain and its private key. Fields of the
// TlsCertificate that a Go client has no use for (ocsp_staple,
// signed_certificate_timestamp, password, watched_directory,
// private_key_provider next to a private_key) are left in Secret.Raw.
type TLSCertificate struct {
	// CertificateChain is the PEM certificate chain, leaf first.
	CertificateChain DataSource
	// PrivateKey is the PEM private key of the leaf certificate.
	PrivateKey DataSource
}

// ValidationContext says how to validate a peer's certificate. Fields not
// modelled here (certificate hashes and SPKIs, crl, a custom validator,
// a certificate provider instance) are in Raw.
//
// An SDS validation context is often merged with a static one (Envoy's
// combined_validation_context), so a context with SAN matchers and no CA
// is valid here; whoever merges them must insist on a CA in the result.
type ValidationContext struct {
	// TrustedCA is the PEM CA bundle; nil when unset.
	TrustedCA *DataSource
	// SystemRootCerts asks for the system's root CAs.
	SystemRootCerts bool
	// SubjectAltNames match the peer certificate's subject alternative
	// names: the peer is accepted if any matches; an empty list accepts
	// any name.
	SubjectAltNames []SANMatcher
	// Raw is the validation context as received.
	Raw *tlsv3.CertificateValidationContext
}

// SANMatcher matches the subject alternative names of one type.
type SANMatcher struct {
	// Type is the type of SAN to match. SAN_TYPE_UNSPECIFIED marks a
	// matcher from the deprecated match_subject_alt_names, which applies
	// to DNS, URI, EMAIL and IP_ADDRESS names alike.
	Type tlsv3.SubjectAltNameMatcher_SanType
	// OID is the type-id of an OTHER_NAME matcher.
	OID string
	// Matcher matches the name.
	Matcher StringMatcher
}

// GenericSecret is an opaque secret: one value, or several named ones.
type GenericSecret struct {
	// Secret is the single value; nil when Secrets is set.
	Secret *DataSource
	// Secrets are named values distributed together; nil when Secret is
	// set.
	Secrets map[string]DataSource
}

// ResourceName implements Resource.
func (s *Secret) ResourceName() string {
	if s == nil {
		return ""
	}
	return s.Name
}

// Proto implements Resource; it returns Raw.
func (s *Secret) Proto() proto.Message { return s.Raw }

// String describes the secret without any secret material, e.g.
//
//	Secret "server-cert": tls_certificate {certificate_chain: inline_bytes (1130 bytes), private_key: filename "/etc/tls/key.pem"}
func (s *Secret) String() string {
	if s == nil {
		return "Secret(nil)"
	}
	var b strings.Builder
	b.WriteString("Secret " + strconv.Quote(s.Name) + ": " + s.Kind.String())
	switch s.Kind {
	case SecretTLSCertificate:
		if c := s.TLSCertificate; c != nil {
			b.WriteString(" {certificate_chain: " + c.CertificateChain.String() + ", private_key: " + c.PrivateKey.String() + "}")
		}
	case SecretValidationContext:
		if vc := s.ValidationContext; vc != nil {
			b.WriteString(" {")
			if vc.TrustedCA != nil {
				b.WriteString("trusted_ca: " + vc.TrustedCA.String() + ", ")
			}
			if vc.SystemRootCerts {
				b.WriteString("system_root_certs, ")
			}
			b.WriteString(strconv.Itoa(len(vc.SubjectAltNames)) + " SAN matchers}")
		}
	case SecretSessionTicketKeys:
		b.WriteString(" (" + strconv.Itoa(len(s.SessionTicketKeys)) + " keys)")
	case SecretGeneric:
		if g := s.GenericSecret; g != nil && g.Secret != nil {
			b.WriteString(" {secret: " + g.Secret.String() + "}")
		} else if g != nil {
			b.WriteString(" {secrets: " + strings.Join(sortedKeys(g.Secrets), ", ") + "}")
		}
	}
	return b.String()
}

// Format prints String whatever the verb, so that %+v cannot reach Raw.
func (s *Secret) Format(f fmt.State, _ rune) { io.WriteString(f, s.String()) }

// LogValue implements slog.LogValuer with String.
func (s *Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

func decodeSecret(_ *DecodeContext, body *anypb.Any) (string, *Secret, error) {
	m := new(tlsv3.Secret)
	if err := proto.Unmarshal(body.GetValue(), m); err != nil {
		return "", nil, fmt.Errorf("unmarshal Secret: %v", err)
	}
	name := m.GetName()
	if name == "" {
		return "", nil, fieldErrorf("name", "must not be empty")
	}
	s := &Secret{Name: name, Raw: m}
	if err := s.init(m); err != nil {
		return name, nil, err
	}
	return name, s, nil
}

// init fills in the one kind of secret m holds; the oneof makes "at most
// one" a given, so only "none" needs checking.
func (s *Secret) init(m *tlsv3.Secret) error {
	switch t := m.GetType().(type) {
	case *tlsv3.Secret_TlsCertificate:
		c, err := newTLSCertificate(t.TlsCertificate)
		if err != nil {
			return at("tls_certificate", err)
		}
		s.Kind, s.TLSCertificate = SecretTLSCertificate, c
	case *tlsv3.Secret_ValidationContext:
		vc, err := newValidationContext(t.ValidationContext)
		if err != nil {
			return at("validation_context", err)
		}
		s.Kind, s.ValidationContext = SecretValidationContext, vc
	case *tlsv3.Secret_SessionTicketKeys:
		keys, err := sessionTicketKeys(t.SessionTicketKeys)
		if err != nil {
			return at("session_ticket_keys", err)
		}
		s.Kind, s.SessionTicketKeys = SecretSessionTicketKeys, keys
	case *tlsv3.Secret_GenericSecret:
		g, err := newGenericSecret(t.GenericSecret)
		if err != nil {
			return at("generic_secret", err)
		}
		s.Kind, s.GenericSecret = SecretGeneric, g
	case nil:
		return fieldErrorf("", "no secret (want one of tls_certificate, validation_context, session_ticket_keys and generic_secret)")
	default:
		return fmt.Errorf("unsupported secret type %T", t)
	}
	return nil
}

// newTLSCertificate wants the certificate chain and private key a Go
// client can load; the alternatives Envoy also accepts (a PKCS#12 bundle,
// a private key provider instead of a key) are refused by name.
func newTLSCertificate(p *tlsv3.TlsCertificate) (*TLSCertificate, error) {
	if p.GetPkcs12() != nil {
		return nil, fieldErrorf("pkcs12", "not supported (want certificate_chain and private_key)")
	}
	if p.GetPrivateKey() == nil && p.GetPrivateKeyProvider() != nil {
		return nil, fieldErrorf("private_key_provider", "not supported (want private_key)")
	}
	chain, err := newDataSource(p.GetCertificateChain())
	if err != nil {
		return nil, at("certificate_chain", err)
	}
	key, err := newDataSource(p.GetPrivateKey())
	if err != nil {
		return nil, at("private_key", err)
	}
	return &TLSCertificate{CertificateChain: chain, PrivateKey: key}, nil
}

func newValidationContext(p *tlsv3.CertificateValidationContext) (*ValidationContext, error) {
	ca, err := optionalDataSource(p.GetTrustedCa())
	if err != nil {
		return nil, at("trusted_ca", err)
	}
	vc := &ValidationContext{TrustedCA: ca, SystemRootCerts: p.GetSystemRootCerts() != nil, Raw: p}
	// As in Envoy, typed matchers, when there are any, replace the
	// deprecated untyped ones, which are then not even validated.
	if typed := p.GetMatchTypedSubjectAltNames(); len(typed) > 0 {
		vc.SubjectAltNames = make([]SANMatcher, len(typed))
		for i, t := range typed {
			m, err := newSANMatcher(t)
			if err != nil {
				return nil, at(index("match_typed_subject_alt_names", i), err)
			}
			vc.SubjectAltNames[i] = m
		}
		return vc, nil
	}
	if untyped := p.GetMatchSubjectAltNames(); len(untyped) > 0 {
		vc.SubjectAltNames = make([]SANMatcher, len(untyped))
		for i, u := range untyped {
			sm, err := newStringMatcher(u)
			if err != nil {
				return nil, at(index("match_subject_alt_names", i), err)
			}
			vc.SubjectAltNames[i] = SANMatcher{Matcher: sm}
		}
	}
	return vc, nil
}

func newSANMatcher(p *tlsv3.SubjectAltNameMatcher) (SANMatcher, error) {
	typ := p.GetSanType()
	if typ == tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED {
		return SANMatcher{}, fieldErrorf("san_type", "must be set")
	}
	if _, ok := tlsv3.SubjectAltNameMatcher_SanType_name[int32(typ)]; !ok {
		return SANMatcher{}, fieldErrorf("san_type", "unknown type %d", int32(typ))
	}
	if typ == tlsv3.SubjectAltNameMatcher_OTHER_NAME && p.GetOid() == "" {
		return SANMatcher{}, fieldErrorf("oid", "must be set for an OTHER_NAME matcher")
	}
	sm, err := newStringMatcher(p.GetMatcher())
	if err != nil {
		return SANMatcher{}, at("matcher", err)
	}
	return SANMatcher{Type: typ, OID: p.GetOid(), Matcher: sm}, nil
}

func sessionTicketKeys(p *tlsv3.TlsSessionTicketKeys) ([]DataSource, error) {
	in := p.GetKeys()
	if len(in) == 0 {
		return nil, fieldErrorf("keys", "must not be empty")
	}
	keys := make([]DataSource, len(in))
	for i, k := range in {
		d, err := newDataSource(k)
		if err != nil {
			return nil, at(index("keys", i), err)
		}
		keys[i] = d
	}
	return keys, nil
}

// newGenericSecret wants exactly one of secret and secrets, which the
// proto only says is expected.
func newGenericSecret(p *tlsv3.GenericSecret) (*GenericSecret, error) {
	in := p.GetSecrets()
	switch {
	case p.GetSecret() != nil && len(in) > 0:
		return nil, errors.New("both secret and secrets are set (want one)")
	case p.GetSecret() != nil:
		d, err := newDataSource(p.GetSecret())
		if err != nil {
			return nil, at("secret", err)
		}
		return &GenericSecret{Secret: &d}, nil
	case len(in) == 0:
		return nil, errors.New("neither secret nor secrets is set")
	}
	g := &GenericSecret{Secrets: make(map[string]DataSource, len(in))}
	// Sorted, so that of several bad entries the same one is reported.
	for _, k := range sortedKeys(in) {
		path := "secrets[" + strconv.Quote(k) + "]"
		if k == "" {
			return nil, fieldErrorf(path, "empty name")
		}
		d, err := newDataSource(in[k])
		if err != nil {
			return nil, at(path, err)
		}
		g.Secrets[k] = d
	}
	return g, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
