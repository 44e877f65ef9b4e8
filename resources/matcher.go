package resources

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// StringMatchKind says how a StringMatcher compares a value with its pattern.
type StringMatchKind int

const (
	// StringMatchExact matches a value equal to the pattern.
	StringMatchExact StringMatchKind = iota
	// StringMatchPrefix matches a value starting with the pattern.
	StringMatchPrefix
	// StringMatchSuffix matches a value ending with the pattern.
	StringMatchSuffix
	// StringMatchContains matches a value containing the pattern.
	StringMatchContains
	// StringMatchRegex matches a value the RE2 pattern matches in full.
	StringMatchRegex
)

// String returns the StringMatchKind as text, for logs and errors.
func (k StringMatchKind) String() string {
	switch k {
	case StringMatchExact:
		return "exact"
	case StringMatchPrefix:
		return "prefix"
	case StringMatchSuffix:
		return "suffix"
	case StringMatchContains:
		return "contains"
	case StringMatchRegex:
		return "safe_regex"
	}
	return "StringMatchKind(" + strconv.Itoa(int(k)) + ")"
}

// StringMatcher is a compiled envoy.type.matcher.v3.StringMatcher. It is an
// immutable value; the zero value matches only the empty string.
type StringMatcher struct {
	kind       StringMatchKind
	pattern    string
	lower      string // pattern in lower case, for a contains that ignores case
	ignoreCase bool
	re         *regexp.Regexp
}

// Kind returns how the matcher compares.
func (m StringMatcher) Kind() StringMatchKind { return m.kind }

// Pattern returns the pattern as configured (the regex source for
// StringMatchRegex).
func (m StringMatcher) Pattern() string { return m.pattern }

// IgnoreCase reports whether comparisons fold ASCII case. It never applies
// to regexes, as in Envoy.
func (m StringMatcher) IgnoreCase() bool { return m.ignoreCase }

// Match reports whether value matches.
func (m StringMatcher) Match(value string) bool {
	switch m.kind {
	case StringMatchExact:
		if m.ignoreCase {
			return equalFoldASCII(value, m.pattern)
		}
		return value == m.pattern
	case StringMatchPrefix:
		if m.ignoreCase {
			return hasPrefixFoldASCII(value, m.pattern)
		}
		return strings.HasPrefix(value, m.pattern)
	case StringMatchSuffix:
		if m.ignoreCase {
			return hasSuffixFoldASCII(value, m.pattern)
		}
		return strings.HasSuffix(value, m.pattern)
	case StringMatchContains:
		if m.ignoreCase {
			return strings.Contains(toLowerASCII(value), m.lower)
		}
		return strings.Contains(value, m.pattern)
	case StringMatchRegex:
		return m.re != nil && m.re.MatchString(value)
	}
	return false
}

// String returns the StringMatcher as text, for logs and errors.
func (m StringMatcher) String() string {
	s := m.kind.String() + ":" + strconv.Quote(m.pattern)
	if m.ignoreCase {
		s += " (ignore case)"
	}
	return s
}

// newStringMatcher compiles a StringMatcher proto. Prefix, suffix and
// contains patterns must not be empty (Envoy's own rule); exact may be.
func newStringMatcher(p *matcherv3.StringMatcher) (StringMatcher, error) {
	if p == nil {
		return StringMatcher{}, errors.New("missing")
	}
	m := StringMatcher{ignoreCase: p.GetIgnoreCase()}
	switch pat := p.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		m.kind, m.pattern = StringMatchExact, pat.Exact
	case *matcherv3.StringMatcher_Prefix:
		m.kind, m.pattern = StringMatchPrefix, pat.Prefix
	case *matcherv3.StringMatcher_Suffix:
		m.kind, m.pattern = StringMatchSuffix, pat.Suffix
	case *matcherv3.StringMatcher_Contains:
		m.kind, m.pattern = StringMatchContains, pat.Contains
	case *matcherv3.StringMatcher_SafeRegex:
		return regexStringMatcher(pat.SafeRegex)
	case nil:
		return StringMatcher{}, errors.New("no match pattern")
	default:
		return StringMatcher{}, fmt.Errorf("unsupported match pattern %T", pat)
	}
	if m.kind != StringMatchExact && m.pattern == "" {
		return StringMatcher{}, fmt.Errorf("empty %s pattern", m.kind)
	}
	if m.ignoreCase && m.kind == StringMatchContains {
		m.lower = toLowerASCII(m.pattern)
	}
	return m, nil
}

// stringMatcherOf builds a matcher from one of HeaderMatcher's older
// single-purpose fields, which do not fold case.
func stringMatcherOf(kind StringMatchKind, pattern string) (StringMatcher, error) {
	if kind != StringMatchExact && pattern == "" {
		return StringMatcher{}, fmt.Errorf("empty %s pattern", kind)
	}
	return StringMatcher{kind: kind, pattern: pattern}, nil
}

func regexStringMatcher(r *matcherv3.RegexMatcher) (StringMatcher, error) {
	re, err := compileFullMatch(r.GetRegex())
	if err != nil {
		return StringMatcher{}, err
	}
	return StringMatcher{kind: StringMatchRegex, pattern: r.GetRegex(), re: re}, nil
}

// fullMatchPrefix and fullMatchSuffix anchor a pattern at both ends;
// Route.RegexPattern takes them off again.
const (
	fullMatchPrefix = `^(?:`
	fullMatchSuffix = `)$`
)

// compileFullMatch compiles an RE2 pattern (Go's regexp is RE2) that must
// match a whole value, as Envoy's safe_regex does. Only a ')' can reach
// out of the anchoring group and turn an invalid pattern such as "a)|(b"
// into a valid, different expression, so a pattern holding one is parsed
// on its own first.

func compileFullMatch(pattern string) (*regexp.Regexp, error) {
	if strings.IndexByte(pattern, ')') >= 0 {
		if _, err := syntax.Parse(pattern, syntax.Perl); err != nil {
			return nil, fmt.Errorf("invalid regex %q: %v", pattern, err)
		}
	}
	re, err := regexp.Compile(fullMatchPrefix + pattern + fullMatchSuffix)
	if err != nil {
		// Report the error in terms of the pattern as configured.
		if _, perr := syntax.Parse(pattern, syntax.Perl); perr != nil {
			err = perr
		}
		return nil, fmt.Errorf("invalid regex %q: %v", pattern, err)
	}
	return re, nil
}

// HeaderMatchKind says what a HeaderMatcher tests.
type HeaderMatchKind int

const (
	// HeaderMatchString tests the value with a StringMatcher.
	HeaderMatchString HeaderMatchKind = iota
	// HeaderMatchRange tests that the value is an integer in [start, end).
	HeaderMatchRange
	// HeaderMatchPresent tests only whether the header is present.
	HeaderMatchPresent
)

// String returns the HeaderMatchKind as text, for logs and errors.
func (k HeaderMatchKind) String() string {
	switch k {
	case HeaderMatchString:
		return "string"
	case HeaderMatchRange:
		return "range"
	case HeaderMatchPresent:
		return "present"
	}
	return "HeaderMatchKind(" + strconv.Itoa(int(k)) + ")"
}

// HeaderMatcher is a compiled route.v3.HeaderMatcher: an immutable value
// that tests one request header.
type HeaderMatcher struct {
	name           string
	kind           HeaderMatchKind
	str            StringMatcher
	start, end     int64
	present        bool
	invert         bool
	missingAsEmpty bool
}

// Name returns the header name, lower-cased: header names are
// case-insensitive and gRPC metadata keys are always lower case.
func (h HeaderMatcher) Name() string { return h.name }

// Kind returns what the matcher tests.
func (h HeaderMatcher) Kind() HeaderMatchKind { return h.kind }

// StringMatcher returns the value matcher of a HeaderMatchString matcher.
func (h HeaderMatcher) StringMatcher() StringMatcher { return h.str }

// Range returns the half-open range [start, end) of a HeaderMatchRange
// matcher.
func (h HeaderMatcher) Range() (start, end int64) { return h.start, h.end }

// PresentMatch returns what a HeaderMatchPresent matcher wants: true for a
// present header, false for an absent one.
func (h HeaderMatcher) PresentMatch() bool { return h.present }

// InvertMatch reports whether the result is inverted.
func (h HeaderMatcher) InvertMatch() bool { return h.invert }

// TreatMissingAsEmpty reports whether an absent header is tested as if its
// value were empty.
func (h HeaderMatcher) TreatMissingAsEmpty() bool { return h.missingAsEmpty }

// Match reports whether the header matches, given its value (all values of
// a repeated header joined with ",") and whether it is present. As in Envoy,
// an absent header matches nothing, even inverted, unless the matcher tests
// presence or treats a missing header as empty.
func (h HeaderMatcher) Match(value string, present bool) bool {
	if h.kind == HeaderMatchPresent {
		return (present == h.present) != h.invert
	}
	if !present {
		if !h.missingAsEmpty {
			return false
		}
		value = ""
	}
	var ok bool
	switch h.kind {
	case HeaderMatchString:
		ok = h.str.Match(value)
	case HeaderMatchRange:
		n, err := strconv.ParseInt(value, 10, 64)
		ok = err == nil && h.start <= n && n < h.end
	}
	return ok != h.invert
}

// String returns the HeaderMatcher as text, for logs and errors.
func (h HeaderMatcher) String() string {
	var s string
	switch h.kind {
	case HeaderMatchString:
		s = h.name + " " + h.str.String()
	case HeaderMatchRange:
		s = fmt.Sprintf("%s range:[%d,%d)", h.name, h.start, h.end)
	default:
		s = fmt.Sprintf("%s present:%t", h.name, h.present)
	}
	if h.invert {
		s = "not " + s
	}
	return s
}

// NewHeaderMatcher compiles p as a route's header matchers are compiled,
// for the matchers a resource keeps as received: a retry policy's
// retriable_headers and retriable_request_headers, which only an HTTP
// client reads. An error names the field of p that is wrong.
func NewHeaderMatcher(p *routev3.HeaderMatcher) (HeaderMatcher, error) { return newHeaderMatcher(p) }

func newHeaderMatcher(p *routev3.HeaderMatcher) (HeaderMatcher, error) {
	if p.GetName() == "" {
		return HeaderMatcher{}, fieldErrorf("name", "must not be empty")
	}
	h := HeaderMatcher{
		name:           toLowerASCII(p.GetName()),
		invert:         p.GetInvertMatch(),
		missingAsEmpty: p.GetTreatMissingHeaderAsEmpty(),
	}
	var err error
	var field string
	switch spec := p.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_ExactMatch:
		field = "exact_match"
		h.str, err = stringMatcherOf(StringMatchExact, spec.ExactMatch)
	case *routev3.HeaderMatcher_PrefixMatch:
		field = "prefix_match"
		h.str, err = stringMatcherOf(StringMatchPrefix, spec.PrefixMatch)
	case *routev3.HeaderMatcher_SuffixMatch:
		field = "suffix_match"
		h.str, err = stringMatcherOf(StringMatchSuffix, spec.SuffixMatch)
	case *routev3.HeaderMatcher_ContainsMatch:
		field = "contains_match"
		h.str, err = stringMatcherOf(StringMatchContains, spec.ContainsMatch)
	case *routev3.HeaderMatcher_SafeRegexMatch:
		field = "safe_regex_match"
		h.str, err = regexStringMatcher(spec.SafeRegexMatch)
	case *routev3.HeaderMatcher_StringMatch:
		field = "string_match"
		h.str, err = newStringMatcher(spec.StringMatch)
	case *routev3.HeaderMatcher_RangeMatch:
		h.kind = HeaderMatchRange
		h.start, h.end = spec.RangeMatch.GetStart(), spec.RangeMatch.GetEnd()
		if h.start > h.end {
			return HeaderMatcher{}, fieldErrorf("range_match", "start %d is after end %d", h.start, h.end)
		}
	case *routev3.HeaderMatcher_PresentMatch:
		h.kind, h.present = HeaderMatchPresent, spec.PresentMatch
	case nil:
		// Envoy's documented default: match on presence.
		h.kind, h.present = HeaderMatchPresent, true
	default:
		return HeaderMatcher{}, fmt.Errorf("unsupported header match specifier %T", spec)
	}
	if err != nil {
		return HeaderMatcher{}, at(field, err)
	}
	return h, nil
}

// QueryParameterMatcher is a compiled route.v3.QueryParameterMatcher: an
// immutable value that tests one query parameter. gRPC requests have no
// query string, so a gRPC client treats a route with query parameter
// matchers as one that never matches.
type QueryParameterMatcher struct {
	name     string
	presence bool // tests presence only
	present  bool // with presence: whether the parameter must be present
	str      StringMatcher
}

// Name returns the query parameter's name.
func (q QueryParameterMatcher) Name() string { return q.name }

// PresentMatch reports whether the matcher tests presence only, and if so
// whether it wants the parameter present (true) or absent (false).
func (q QueryParameterMatcher) PresentMatch() (presenceOnly, wantPresent bool) {
	return q.presence, q.present
}

// StringMatcher returns the value matcher; unused for a presence test.
func (q QueryParameterMatcher) StringMatcher() StringMatcher { return q.str }

// Match reports whether the parameter matches, given its value and whether
// it is present. An absent parameter matches only a test for absence.
func (q QueryParameterMatcher) Match(value string, present bool) bool {
	if q.presence {
		return present == q.present
	}
	return present && q.str.Match(value)
}

func newQueryParameterMatcher(p *routev3.QueryParameterMatcher) (QueryParameterMatcher, error) {
	if p.GetName() == "" {
		return QueryParameterMatcher{}, fieldErrorf("name", "must not be empty")
	}
	q := QueryParameterMatcher{name: p.GetName()}
	switch spec := p.GetQueryParameterMatchSpecifier().(type) {
	case *routev3.QueryParameterMatcher_StringMatch:
		sm, err := newStringMatcher(spec.StringMatch)
		if err != nil {
			return QueryParameterMatcher{}, at("string_match", err)
		}
		q.str = sm
	case *routev3.QueryParameterMatcher_PresentMatch:
		q.presence, q.present = true, spec.PresentMatch
	case nil:
		return QueryParameterMatcher{}, errors.New("no match specifier")
	default:
		return QueryParameterMatcher{}, fmt.Errorf("unsupported match specifier %T", spec)
	}
	return q, nil
}
