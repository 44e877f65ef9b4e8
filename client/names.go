package client

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// xdstp:// names (xRFC TP1, gRFC A47) have the form
//
//	xdstp://[authority]/{resource type}/{id}[?{context parameters}]
//
// Two names that differ only in the order of their context parameters, or
// in how they spell a character with percent-encoding, name the same
// resource. The client keys its cache, and speaks to servers, by one
// canonical spelling of each, so that a response naming a resource in
// another spelling still reaches its watchers:
//
//   - context parameters sorted by key (byte order of the decoded key, then
//     of its spelling); a key given twice keeps its last value, as gRFC A47 suggests; a key
//     without "=" has the empty value; empty parameters ("a=1&&b=2") and
//     an empty query ("id?") are dropped;
//   - percent-encoding normalised as RFC 3986 section 6.2.2 says:
//     hexadecimal digits in upper case, unreserved characters (letters,
//     digits, "-", ".", "_", "~") never encoded; characters a URI does
//     not allow in that component (a space, say) always encoded.
//     Reserved characters keep their form: "%2F" and "/" stay different,
//     since decoding one would change what the name says.
//
// A name with a processing directive ("#...") is a locator, not a name,
// and is refused, as is one without a resource type or id, or with a
// malformed percent-encoding.

// xdstpScheme starts every new-style name. A name that does not start with
// it is an opaque old-style name, used as it is.
const xdstpScheme = "xdstp:"

// canonicalName returns the canonical spelling of an xdstp:// name, and
// any other name as it is. An already canonical name is returned without
// copying it.
func canonicalName(name string) (string, error) {
	if !strings.HasPrefix(name, xdstpScheme) {
		return name, nil
	}
	rest, ok := strings.CutPrefix(name, xdstpScheme+"//")
	if !ok {
		return "", errors.New(`an xdstp name starts with "xdstp://"`)
	}
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		return "", fmt.Errorf("processing directive %q: a resource name cannot have one (it belongs in locators)", rest[i:])
	}
	path, query, _ := strings.Cut(rest, "?")
	authority, typeAndID, ok := strings.Cut(path, "/")
	if !ok {
		return "", errors.New("no resource type or id after the authority")
	}
	typ, id, ok := strings.Cut(typeAndID, "/")
	switch {
	case typ == "":
		return "", errors.New("empty resource type")
	case !ok || id == "":
		return "", fmt.Errorf("no resource id after the resource type %q", typ)
	}
	if query == "" && isPlain(path, pathChar) {
		// The usual name, already canonical: no copy.
		if strings.HasSuffix(name, "?") {
			return name[:len(name)-1], nil
		}
		return name, nil
	}

	var b strings.Builder
	b.Grow(len(name))
	b.WriteString(xdstpScheme + "//")
	if err := writeNormalized(&b, authority, authorityChar); err != nil {
		return "", fmt.Errorf("authority: %w", err)
	}
	b.WriteByte('/')
	if err := writeNormalized(&b, typeAndID, pathChar); err != nil {
		return "", fmt.Errorf("path: %w", err)
	}
	params, err := parseParams(query)
	if err != nil {
		return "", err
	}
	for i, p := range params {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(p.key)
		b.WriteByte('=')
		b.WriteString(p.value)
	}
	if s := b.String(); s != name {
		return s, nil
	}
	return name, nil
}

// canonicalReceived is canonicalName for a name a server sent: a name that
// is not a valid xdstp name is kept as it is. No watch can have it, since
// watches of invalid names are refused, so the resource is ignored (or, for
// a wildcard watch, known by that spelling).
func canonicalReceived(name string) string {
	if !strings.HasPrefix(name, xdstpScheme) {
		return name
	}
	if c, err := canonicalName(name); err == nil {
		return c
	}
	return name
}

// param is one context parameter, normalised; sortKey is its key decoded.
type param struct{ key, value, sortKey string }

// parseParams splits, normalises, de-duplicates and sorts a query.
func parseParams(query string) ([]param, error) {
	var params []param
	for kv := range strings.SplitSeq(query, "&") {
		if kv == "" {
			continue
		}
		rawKey, rawValue, _ := strings.Cut(kv, "=")
		if rawKey == "" {
			return nil, fmt.Errorf("context parameter %q has no key", kv)
		}
		var p param
		var kb, vb strings.Builder
		if err := writeNormalized(&kb, rawKey, queryChar); err != nil {
			return nil, fmt.Errorf("context parameter key %q: %w", rawKey, err)
		}
		if err := writeNormalized(&vb, rawValue, queryChar); err != nil {
			return nil, fmt.Errorf("context parameter %q: %w", rawKey, err)
		}
		p.key, p.value = kb.String(), vb.String()
		p.sortKey = decodeNormalized(p.key)
		params = append(params, p)
	}
	// Stable, so that of a key given twice the last is last; then keep it.
	// Keys that decode alike but differ in a reserved character ("a/b",
	// "a%2Fb") are different keys, ordered by their spelling.
	slices.SortStableFunc(params, func(a, b param) int {
		return cmp.Or(cmp.Compare(a.sortKey, b.sortKey), cmp.Compare(a.key, b.key))
	})
	out := params[:0]
	for i, p := range params {
		if i+1 < len(params) && params[i+1].key == p.key {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// Which characters a component may hold unencoded (RFC 3986 section 3).
const (
	authorityChar = iota // reg-name, userinfo, port, IP literal
	pathChar             // segments and "/"
	queryChar            // a context parameter key or value: "&" and "=" delimit
)

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func isSubDelim(c byte) bool { return strings.IndexByte("!$&'()*+,;=", c) >= 0 }

// allowed tells whether c may appear unencoded in a component of kind.
func allowed(c byte, kind int) bool {
	if isUnreserved(c) {
		return true
	}
	switch kind {
	case authorityChar:
		return isSubDelim(c) || c == ':' || c == '@' || c == '[' || c == ']'
	case pathChar:
		return isSubDelim(c) || c == ':' || c == '@' || c == '/'
	default:
		return c != '&' && c != '=' && (isSubDelim(c) || c == ':' || c == '@' || c == '/' || c == '?')
	}
}

// isPlain tells whether s needs no normalisation: no percent-encoding and
// only characters allowed unencoded.
func isPlain(s string, kind int) bool {
	for i := 0; i < len(s); i++ {
		if !allowed(s[i], kind) {
			return false
		}
	}
	return true
}

const upperHex = "0123456789ABCDEF"

// writeNormalized writes s with its percent-encoding normalised.
func writeNormalized(b *strings.Builder, s string, kind int) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				end := min(i+3, len(s))
				return fmt.Errorf("malformed percent-encoding %q", s[i:end])
			}
			d := unhex(s[i+1])<<4 | unhex(s[i+2])
			if isUnreserved(d) {
				b.WriteByte(d)
			} else {
				b.WriteByte('%')
				b.WriteByte(upperHex[d>>4])
				b.WriteByte(upperHex[d&15])
			}
			i += 2
		case allowed(c, kind):
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		}
	}
	return nil
}

// decodeNormalized decodes a string writeNormalized wrote.
func decodeNormalized(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			out = append(out, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
