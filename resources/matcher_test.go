package resources

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

func mustHeaderMatcher(t *testing.T, p *routev3.HeaderMatcher) HeaderMatcher {
	t.Helper()
	h, err := newHeaderMatcher(p)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func sm(pattern string, kind StringMatchKind, ignoreCase bool) *matcherv3.StringMatcher {
	m := &matcherv3.StringMatcher{IgnoreCase: ignoreCase}
	switch kind {
	case StringMatchExact:
		m.MatchPattern = &matcherv3.StringMatcher_Exact{Exact: pattern}
	case StringMatchPrefix:
		m.MatchPattern = &matcherv3.StringMatcher_Prefix{Prefix: pattern}
	case StringMatchSuffix:
		m.MatchPattern = &matcherv3.StringMatcher_Suffix{Suffix: pattern}
	case StringMatchContains:
		m.MatchPattern = &matcherv3.StringMatcher_Contains{Contains: pattern}
	case StringMatchRegex:
		m.MatchPattern = &matcherv3.StringMatcher_SafeRegex{SafeRegex: regexMatcher(pattern)}
	}
	return m
}

func TestStringMatcher(t *testing.T) {
	tests := []struct {
		pattern    string
		kind       StringMatchKind
		ignoreCase bool
		value      string
		want       bool
	}{
		{"abc", StringMatchExact, false, "abc", true},
		{"abc", StringMatchExact, false, "ABC", false},
		{"abc", StringMatchExact, true, "ABC", true},
		{"", StringMatchExact, false, "", true},
		{"ab", StringMatchPrefix, false, "abc", true},
		{"ab", StringMatchPrefix, false, "Abc", false},
		{"AB", StringMatchPrefix, true, "abc", true},
		{"bc", StringMatchSuffix, false, "abc", true},
		{"BC", StringMatchSuffix, true, "abc", true},
		{"BC", StringMatchSuffix, false, "abc", false},
		{"b", StringMatchContains, false, "abc", true},
		{"B", StringMatchContains, true, "abc", true},
		{"B", StringMatchContains, false, "abc", false},
		{"a.c", StringMatchRegex, false, "abc", true},
		{"a.c", StringMatchRegex, false, "abcd", false},
		{"A.C", StringMatchRegex, true, "abc", false}, // ignore_case never applies to regexes
	}
	for _, tt := range tests {
		m, err := newStringMatcher(sm(tt.pattern, tt.kind, tt.ignoreCase))
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind() != tt.kind || m.Pattern() != tt.pattern || m.IgnoreCase() != (tt.ignoreCase && tt.kind != StringMatchRegex) {
			t.Errorf("matcher %v does not reflect its proto", m)
		}
		if got := m.Match(tt.value); got != tt.want {
			t.Errorf("%v.Match(%q) = %v, want %v", m, tt.value, got, tt.want)
		}
	}
	if (StringMatcher{}).Match("x") || !(StringMatcher{}).Match("") {
		t.Error("zero StringMatcher must match only the empty string")
	}
	if _, err := newStringMatcher(nil); err == nil {
		t.Error("nil StringMatcher accepted")
	}
}

func TestHeaderMatcherMatch(t *testing.T) {
	type input struct {
		value   string
		present bool
		want    bool
	}
	tests := []struct {
		name   string
		p      *routev3.HeaderMatcher
		inputs []input
	}{
		{"exact", &hm{Name: "h", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "v"}},
			[]input{{"v", true, true}, {"w", true, false}, {"", false, false}}},
		{"exact inverted: absent still fails", &hm{Name: "h", InvertMatch: true, HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "v"}},
			[]input{{"v", true, false}, {"w", true, true}, {"", false, false}}},
		{"missing as empty", &hm{Name: "h", TreatMissingHeaderAsEmpty: true, HeaderMatchSpecifier: &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: regexMatcher("")}},
			[]input{{"", false, true}, {"x", true, false}}},
		{"missing as empty inverted", &hm{Name: "h", TreatMissingHeaderAsEmpty: true, InvertMatch: true,
			HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: 0, End: 10}}},
			[]input{{"", false, true}, {"5", true, false}}},
		{"regex", &hm{Name: "h", HeaderMatchSpecifier: &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: regexMatcher(`\d{3}`)}},
			[]input{{"123", true, true}, {"1234", true, false}}},
		{"regex inverted", &hm{Name: "h", InvertMatch: true, HeaderMatchSpecifier: &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: regexMatcher(`\d{3}`)}},
			[]input{{"1234", true, true}, {"123", true, false}}},
		{"range is half open", &hm{Name: "h", HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: -10, End: 0}}},
			[]input{{"-10", true, true}, {"-1", true, true}, {"0", true, false}, {"x", true, false}, {"", false, false}}},
		{"range inverted", &hm{Name: "h", InvertMatch: true, HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: -10, End: 0}}},
			[]input{{"-1", true, false}, {"0", true, true}, {"x", true, true}}},
		{"present", &hm{Name: "h", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}},
			[]input{{"", true, true}, {"", false, false}}},
		{"absent", &hm{Name: "h", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: false}},
			[]input{{"", true, false}, {"", false, true}}},
		{"present inverted", &hm{Name: "h", InvertMatch: true, HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}},
			[]input{{"x", true, false}, {"", false, true}}},
		{"no specifier is present", &hm{Name: "h"}, []input{{"x", true, true}, {"", false, false}}},
		{"prefix", &hm{Name: "h", HeaderMatchSpecifier: &routev3.HeaderMatcher_PrefixMatch{PrefixMatch: "ab"}},
			[]input{{"abc", true, true}, {"ABc", true, false}}},
		{"suffix", &hm{Name: "h", HeaderMatchSpecifier: &routev3.HeaderMatcher_SuffixMatch{SuffixMatch: "bc"}},
			[]input{{"abc", true, true}, {"abC", true, false}}},
		{"contains", &hm{Name: "h", HeaderMatchSpecifier: &routev3.HeaderMatcher_ContainsMatch{ContainsMatch: "b"}},
			[]input{{"abc", true, true}, {"ac", true, false}}},
		{"string match ignore case", &hm{Name: "h", HeaderMatchSpecifier: stringMatch(sm("ab", StringMatchPrefix, true))},
			[]input{{"ABc", true, true}, {"xab", true, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mustHeaderMatcher(t, tt.p)
			for _, in := range tt.inputs {
				if got := h.Match(in.value, in.present); got != in.want {
					t.Errorf("%v: Match(%q, present=%v) = %v, want %v", h, in.value, in.present, got, in.want)
				}
			}
		})
	}
}

func TestHeaderMatcherAccessors(t *testing.T) {
	h := mustHeaderMatcher(t, &hm{Name: "X-Id", InvertMatch: true, TreatMissingHeaderAsEmpty: true,
		HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: 1, End: 9}}})
	if s, e := h.Range(); h.Name() != "x-id" || h.Kind() != HeaderMatchRange || s != 1 || e != 9 || !h.InvertMatch() || !h.TreatMissingAsEmpty() {
		t.Errorf("accessors do not reflect the proto: %v", h)
	}
	if got := h.String(); got != "not x-id range:[1,9)" {
		t.Errorf("String() = %q", got)
	}
	p := mustHeaderMatcher(t, &hm{Name: "a", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: false}})
	if p.Kind() != HeaderMatchPresent || p.PresentMatch() || p.String() != "a present:false" {
		t.Errorf("present matcher = %v", p)
	}
	s := mustHeaderMatcher(t, &hm{Name: "a", HeaderMatchSpecifier: stringMatch(sm("v", StringMatchExact, true))})
	if s.Kind() != HeaderMatchString || s.StringMatcher().Pattern() != "v" || s.String() != `a exact:"v" (ignore case)` {
		t.Errorf("string matcher = %v", s)
	}
	for k, want := range map[HeaderMatchKind]string{HeaderMatchString: "string", HeaderMatchRange: "range", HeaderMatchPresent: "present", 7: "HeaderMatchKind(7)"} {
		if k.String() != want {
			t.Errorf("String() = %q, want %q", k.String(), want)
		}
	}
	for k, want := range map[StringMatchKind]string{StringMatchRegex: "safe_regex", StringMatchContains: "contains", 9: "StringMatchKind(9)"} {
		if k.String() != want {
			t.Errorf("String() = %q, want %q", k.String(), want)
		}
	}
}

func TestQueryParameterMatcher(t *testing.T) {
	present, err := newQueryParameterMatcher(&routev3.QueryParameterMatcher{Name: "q",
		QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}})
	if err != nil {
		t.Fatal(err)
	}
	if only, want := present.PresentMatch(); !only || !want || present.Name() != "q" {
		t.Errorf("present matcher = %+v", present)
	}
	if !present.Match("", true) || present.Match("", false) {
		t.Error("present_match: true must match only a present parameter")
	}
	absent, err := newQueryParameterMatcher(&routev3.QueryParameterMatcher{Name: "q",
		QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: false}})
	if err != nil {
		t.Fatal(err)
	}
	if absent.Match("", true) || !absent.Match("", false) {
		t.Error("present_match: false must match only an absent parameter")
	}
	str, err := newQueryParameterMatcher(&routev3.QueryParameterMatcher{Name: "q",
		QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: sm("v", StringMatchPrefix, false)}})
	if err != nil {
		t.Fatal(err)
	}
	if !str.Match("v1", true) || str.Match("w", true) || str.Match("v1", false) || str.StringMatcher().Kind() != StringMatchPrefix {
		t.Error("string query matcher mismatch")
	}
}

func TestCompileFullMatchErrors(t *testing.T) {
	tests := map[string]string{
		`a)|(b`:  "unexpected )",
		`abc\`:   "trailing backslash",
		`(a`:     "missing closing )",
		`a{2,1}`: "invalid repeat count",
	}
	for pattern, want := range tests {
		_, err := compileFullMatch(pattern)
		checkErr(t, err, want)
		if err != nil && strings.Contains(err.Error(), "^(?:") {
			t.Errorf("error %q shows the anchored form", err)
		}
	}
	re, err := compileFullMatch(`(a|ab)(c|bcd)`)
	if err != nil || !re.MatchString("abcd") || re.MatchString("abcde") {
		t.Errorf("grouped pattern: %v", err)
	}
}
