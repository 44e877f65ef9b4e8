package route

import (
	"regexp"
	"strings"
	"testing"
)

// FuzzParseRetryPolicy: any retry_on and num_retries give a policy with at
// least two attempts and a condition the adapter knows, or none, and never
// a panic.
func FuzzParseRetryPolicy(f *testing.F) {
	f.Add("unavailable,cancelled", uint32(3))
	f.Add(" ,UNAVAILABLE , 5xx,,", uint32(0))
	f.Fuzz(func(t *testing.T, on string, n uint32) {
		p := parseRetryPolicy(retryPolicy(on, n), testRetryOn)
		if p == nil {
			return
		}
		if p.MaxAttempts < 2 || p.On == 0 || p.On&^(1<<14|1<<1) != 0 || p.Base <= 0 || p.Max <= 0 {
			t.Errorf("retry_on %q, num_retries %d: %+v", on, n, p)
		}
		if !strings.Contains(strings.ToLower(on), "unavailable") && !strings.Contains(strings.ToLower(on), "cancelled") {
			t.Errorf("retry_on %q names no known condition, yet gave %+v", on, p)
		}
	})
}

// FuzzGoTemplate: any substitution becomes a template Go's regexp expands
// without a panic.
func FuzzGoTemplate(f *testing.F) {
	f.Add(`\1-\2`)
	f.Add(`$1 and \\ and \`)
	re := regexp.MustCompile(`^(\w+)-(\d+)$`)
	f.Fuzz(func(t *testing.T, sub string) {
		_ = re.ReplaceAllString("alice-42", goTemplate(sub))
	})
}
