package resources

import (
	"errors"
	"fmt"
	"strings"
)

// domainKind ranks the four kinds of virtual host domain; a higher kind is a
// better match.
type domainKind int

const (
	domainInvalid   domainKind = iota
	domainUniversal            // "*"
	domainPrefix               // "foo.*": a wildcard at the end
	domainSuffix               // "*.foo.com": a wildcard at the start
	domainExact                // "foo.com"
)

func kindOfDomain(d string) domainKind {
	switch n := strings.Count(d, "*"); {
	case d == "":
		return domainInvalid
	case n == 0:
		return domainExact
	case n > 1:
		return domainInvalid
	case d == "*":
		return domainUniversal
	case d[0] == '*':
		return domainSuffix
	case d[len(d)-1] == '*':
		return domainPrefix
	}
	return domainInvalid
}

// validateDomain checks one virtual host domain: a host name, "*", or a
// host name with one wildcard as its first or last character.
func validateDomain(d string) error {
	if kindOfDomain(d) != domainInvalid {
		return nil
	}
	switch {
	case d == "":
		return errors.New("must not be empty")
	case strings.Count(d, "*") > 1:
		return fmt.Errorf("%q has more than one wildcard", d)
	default:
		return fmt.Errorf("%q has a wildcard that is neither its first nor its last character", d)
	}
}

// matchDomain reports whether authority matches the domain d of kind k.
// Comparisons fold ASCII case, and a wildcard stands for at least one
// character, as in Envoy: "*.foo.com" does not match ".foo.com".
func matchDomain(d string, k domainKind, authority string) bool {
	switch k {
	case domainUniversal:
		return true
	case domainExact:
		return equalFoldASCII(authority, d)
	case domainSuffix:
		return len(authority) >= len(d) && hasSuffixFoldASCII(authority, d[1:])
	case domainPrefix:
		return len(authority) >= len(d) && hasPrefixFoldASCII(authority, d[:len(d)-1])
	}
	return false
}

// FindVirtualHost returns the virtual host whose domains best match
// authority (the request's host, with its port if the caller wants ports
// to count), or nil if none matches. Matching ignores ASCII case. The best
// match is an exact domain; then the longest suffix wildcard ("*.foo.com");
// then the longest prefix wildcard ("foo.*"); then "*". Between equally good
// domains the first in order wins. Invalid domains, which decoded route
// configurations never hold, match nothing.
func FindVirtualHost(vhs []*VirtualHost, authority string) *VirtualHost {
	var (
		best     *VirtualHost
		bestKind = domainInvalid
		bestLen  int
	)
	for _, vh := range vhs {
		if vh == nil {
			continue
		}
		for _, d := range vh.Domains {
			k := kindOfDomain(d)
			if k < bestKind || (k == bestKind && len(d) <= bestLen) {
				continue
			}
			if !matchDomain(d, k, authority) {
				continue
			}
			best, bestKind, bestLen = vh, k, len(d)
			if k == domainExact {
				// Nothing beats an exact match, and for exact domains
				// every match has the same length.
				return best
			}
		}
	}
	return best
}
