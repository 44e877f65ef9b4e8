package upstreamtls

import (
	"crypto/x509"
	"strings"

	"github.com/goxds/xds/resources"
)

// sanMatches reports whether one SAN of cert matches one matcher (gRFC
// A29): DNS, URI (SPIFFE IDs included), email and IP SANs are tried. An
// exact matcher also accepts a wildcard DNS SAN ("*.example.com") that
// covers its name, as a TLS hostname check would.
func (hi *HandshakeInfo) sanMatches(cert *x509.Certificate) bool {
	for _, m := range hi.sans {
		for _, dns := range cert.DNSNames {
			if m.Match(dns) || (m.Kind() == resources.StringMatchExact && wildcardCovers(dns, m.Pattern())) {
				return true
			}
		}
		for _, u := range cert.URIs {
			if m.Match(u.String()) {
				return true
			}
		}
		for _, e := range cert.EmailAddresses {
			if m.Match(e) {
				return true
			}
		}
		for _, ip := range cert.IPAddresses {
			if m.Match(ip.String()) {
				return true
			}
		}
	}
	return false
}

// wildcardCovers reports whether the DNS SAN san, of the form
// "*.rest", covers name: one non-empty leftmost label, then rest, compared
// without case as DNS names are. A SAN without a leading "*." covers
// nothing here (Match has compared it).
func wildcardCovers(san, name string) bool {
	rest, ok := strings.CutPrefix(san, "*")
	if !ok || !strings.HasPrefix(rest, ".") || len(rest) < 2 {
		return false
	}
	label, tail, ok := strings.Cut(name, ".")
	if !ok || label == "" || label == "*" {
		return false
	}
	return strings.EqualFold("."+tail, rest)
}

// sanList lists cert's SANs for errors, each with its kind.
func sanList(cert *x509.Certificate) []string {
	var out []string
	for _, d := range cert.DNSNames {
		out = append(out, "DNS:"+d)
	}
	for _, u := range cert.URIs {
		out = append(out, "URI:"+u.String())
	}
	for _, e := range cert.EmailAddresses {
		out = append(out, "email:"+e)
	}
	for _, ip := range cert.IPAddresses {
		out = append(out, "IP:"+ip.String())
	}
	return out
}
