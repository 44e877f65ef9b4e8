package route

import "regexp"

// RegexSubstitute is Envoy's RegexMatchAndSubstitute applied to s: every
// match of re replaced by sub, whose \N (Envoy's and RE2's spelling of a
// capture group) names group N. Path rewrites use it as hash policies do.
func RegexSubstitute(re *regexp.Regexp, s, sub string) string {
	return re.ReplaceAllString(s, goTemplate(sub))
}
