package resources

import (
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// tlsTransportSocketName is the only transport socket name gRPC accepts on
// a cluster: the name is how Envoy selects the socket, so another name with
// a TLS config would be a different socket dressed as TLS.
const tlsTransportSocketName = "envoy.transport_sockets.tls"

// maxSNILength is the longest server name TLS lets a client send (RFC 6066:
// a DNS host name, at most 255 bytes).
const maxSNILength = 255

// SecurityConfig is a cluster's UpstreamTlsContext as gRPC understands it
// (gRFC A29): where the certificates come from, named as certificate
// provider instances of the bootstrap's certificate_providers, and how the
// server's certificate is checked. It names instances only; resolving them
// against a bootstrap is the job of whoever dials (package grpcxds). A
// resource decoded with a bootstrap in its DecodeContext names only
// instances that bootstrap defines (gRFC A29).
type SecurityConfig struct {
	// RootInstance is the certificate provider instance whose roots verify
	// the server's certificate, and RootCertName the certificate name
	// passed to it. Empty RootInstance means UseSystemRoots.
	RootInstance string
	RootCertName string
	// UseSystemRoots verifies the server against the system's roots
	// (validation_context.system_root_certs, gRFC A82).
	UseSystemRoots bool
	// IdentityInstance is the provider instance of the client certificate
	// presented for mutual TLS, and IdentityCertName its certificate name.
	// Empty: no client certificate (TLS, not mTLS).
	IdentityInstance string
	IdentityCertName string
	// SANMatchers check the server certificate's subject alternative names
	// (DNS, URI, email and IP SANs): one SAN matching one matcher is
	// enough. Empty: any SAN, the chain to the roots alone decides.
	SANMatchers []StringMatcher
	// SNI is the server name sent in the handshake (UpstreamTlsContext.sni),
	// empty for none unless AutoHostSNI applies.
	SNI string
	// AutoHostSNI sends the endpoint's hostname (from EDS) as SNI when it
	// has one, instead of SNI.
	AutoHostSNI bool
	// AutoSNISANValidation checks the server certificate's DNS SANs
	// against the server name sent, instead of SANMatchers, whenever a
	// name is sent (gRFC A101).
	AutoSNISANValidation bool
}

// securityConfig validates an UpstreamTlsContext as gRPC does and returns
// what it asks for. The rules, and the reason for each:
//   - common_tls_context is required: without it nothing says how to
//     verify the server, and an unverified TLS connection is no security.
//   - tls_params and custom_handshaker are rejected: gRPC cannot honour
//     them, and ignoring them would weaken what the server asked for.
//   - certificates only come from certificate provider instances
//     (tls_certificate_provider_instance, ca_certificate_provider_instance,
//     or the deprecated *_certificate_provider_instance fields gRPC still
//     reads); inline certificates and SDS are rejected when they are the
//     only source named.
//   - verification options gRPC does not implement (SPKI or hash pinning,
//     signed certificate timestamps, CRLs, custom validators) are rejected.
//   - trusted_ca, watched_directory, allow_expired_certificate,
//     trust_chain_verification, alpn_protocols, allow_renegotiation and
//     max_session_keys are ignored, as gRPC ignores them.
func securityConfig(u *tlsv3.UpstreamTlsContext) (*SecurityConfig, error) {
	common := u.GetCommonTlsContext()
	if common == nil {
		return nil, fieldErrorf("common_tls_context", "missing")
	}
	if common.GetTlsParams() != nil {
		return nil, fieldErrorf("common_tls_context.tls_params", "not supported")
	}
	if common.GetCustomHandshaker() != nil {
		return nil, fieldErrorf("common_tls_context.custom_handshaker", "not supported")
	}
	sc, err := securityFromProviderFields(common)
	if err != nil {
		return nil, at("common_tls_context", err)
	}
	if sc.RootInstance == "" && !sc.UseSystemRoots {
		// No roots in the current fields: control planes that predate them
		// still write the deprecated ones, which gRPC keeps reading. A
		// current field, where set, wins.
		old, err := securityFromDeprecatedFields(common)
		if err != nil {
			return nil, at("common_tls_context", err)
		}
		sc.RootInstance, sc.RootCertName = old.RootInstance, old.RootCertName
		if sc.IdentityInstance == "" {
			sc.IdentityInstance, sc.IdentityCertName = old.IdentityInstance, old.IdentityCertName
		}
		if len(sc.SANMatchers) == 0 {
			sc.SANMatchers = old.SANMatchers
		}
	}
	if sc.RootInstance == "" && !sc.UseSystemRoots {
		return nil, fieldErrorf("common_tls_context.validation_context.ca_certificate_provider_instance",
			"missing: a client must verify the server's certificate")
	}
	if len(u.GetSni()) > maxSNILength {
		return nil, fieldErrorf("sni", "%d bytes, longer than %d", len(u.GetSni()), maxSNILength)
	}
	sc.SNI = u.GetSni()
	sc.AutoHostSNI = u.GetAutoHostSni()
	sc.AutoSNISANValidation = u.GetAutoSniSanValidation()
	return sc, nil
}

// securityFromProviderFields reads the fields gRFC A29 defines. A zero
// result (and no error) means none of them is set.
func securityFromProviderFields(common *tlsv3.CommonTlsContext) (*SecurityConfig, error) {
	sc := &SecurityConfig{}
	if id := common.GetTlsCertificateProviderInstance(); id != nil {
		sc.IdentityInstance, sc.IdentityCertName = id.GetInstanceName(), id.GetCertificateName()
	} else if len(common.GetTlsCertificates()) != 0 {
		return nil, fieldErrorf("tls_certificates", "not supported (use tls_certificate_provider_instance)")
	} else if len(common.GetTlsCertificateSdsSecretConfigs()) != 0 {
		return nil, fieldErrorf("tls_certificate_sds_secret_configs", "not supported (use tls_certificate_provider_instance)")
	}
	var vc *tlsv3.CertificateValidationContext
	path := "validation_context"
	switch t := common.GetValidationContextType().(type) {
	case nil:
		return sc, nil
	case *tlsv3.CommonTlsContext_ValidationContext:
		vc = t.ValidationContext
	case *tlsv3.CommonTlsContext_CombinedValidationContext:
		vc = t.CombinedValidationContext.GetDefaultValidationContext()
		path = "combined_validation_context.default_validation_context"
		if vc == nil {
			return sc, nil // maybe the deprecated provider field of the combined context
		}
	case *tlsv3.CommonTlsContext_ValidationContextCertificateProviderInstance:
		return sc, nil // deprecated field: read by securityFromDeprecatedFields
	default:
		return nil, fieldErrorf("validation_context_type", "%T not supported", t)
	}
	if err := checkValidationContext(vc); err != nil {
		return nil, at(path, err)
	}
	if ca := vc.GetCaCertificateProviderInstance(); ca != nil {
		sc.RootInstance, sc.RootCertName = ca.GetInstanceName(), ca.GetCertificateName()
	} else if vc.GetSystemRootCerts() != nil {
		sc.UseSystemRoots = true
	}
	for i, m := range vc.GetMatchSubjectAltNames() {
		sm, err := newStringMatcher(m)
		if err != nil {
			return nil, fieldErrorf(path+"."+index("match_subject_alt_names", i), "%v", err)
		}
		sc.SANMatchers = append(sc.SANMatchers, sm)
	}
	return sc, nil
}

// checkValidationContext rejects the verification options gRPC does not
// implement: accepting them silently would verify less than was asked.
func checkValidationContext(vc *tlsv3.CertificateValidationContext) error {
	switch {
	case len(vc.GetVerifyCertificateSpki()) != 0:
		return fieldErrorf("verify_certificate_spki", "not supported")
	case len(vc.GetVerifyCertificateHash()) != 0:
		return fieldErrorf("verify_certificate_hash", "not supported")
	case vc.GetRequireSignedCertificateTimestamp().GetValue():
		return fieldErrorf("require_signed_certificate_timestamp", "not supported")
	case vc.GetCrl() != nil:
		return fieldErrorf("crl", "not supported")
	case vc.GetCustomValidatorConfig() != nil:
		return fieldErrorf("custom_validator_config", "not supported")
	}
	return nil
}

// securityFromDeprecatedFields reads the pre-A29-final fields
// (tls_certificate_certificate_provider_instance, and the provider instance
// of validation_context_certificate_provider_instance or of a combined
// validation context).
func securityFromDeprecatedFields(common *tlsv3.CommonTlsContext) (*SecurityConfig, error) {
	sc := &SecurityConfig{}
	if id := common.GetTlsCertificateCertificateProviderInstance(); id != nil {
		sc.IdentityInstance, sc.IdentityCertName = id.GetInstanceName(), id.GetCertificateName()
	}
	switch t := common.GetValidationContextType().(type) {
	case *tlsv3.CommonTlsContext_ValidationContextCertificateProviderInstance:
		sc.RootInstance, sc.RootCertName = t.ValidationContextCertificateProviderInstance.GetInstanceName(),
			t.ValidationContextCertificateProviderInstance.GetCertificateName()
	case *tlsv3.CommonTlsContext_CombinedValidationContext:
		combined := t.CombinedValidationContext
		for i, m := range combined.GetDefaultValidationContext().GetMatchSubjectAltNames() {
			sm, err := newStringMatcher(m)
			if err != nil {
				return nil, fieldErrorf("combined_validation_context.default_validation_context."+
					index("match_subject_alt_names", i), "%v", err)
			}
			sc.SANMatchers = append(sc.SANMatchers, sm)
		}
		if pi := combined.GetValidationContextCertificateProviderInstance(); pi != nil {
			sc.RootInstance, sc.RootCertName = pi.GetInstanceName(), pi.GetCertificateName()
		}
	}
	return sc, nil
}
