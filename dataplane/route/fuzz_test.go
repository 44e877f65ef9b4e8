package route

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseRetryPolicy: any retry_on and num_retries give a policy with at
// least two attempts and a condition the adapter knows, or none, and never
// a panic.
func FuzzParseRetryPolicy(f *testing.F) {
	f.Add("unavailable,cancelled", uint32(3))
	f.Add(" ,UNAVAILABLE , 5xx,,", uint32(0))
	f.Fuzz(func(t *testing.T, on string, n uint32) {
		if p := parseRetryPolicy(retryPolicy(on, n), Options{HTTP: true}); p != nil && (p.MaxAttempts < 2 || p.On == 0 || p.On >= 1<<(retryEnvoyRateLimited+1) || p.HTTP == nil) {
			t.Errorf("HTTP: retry_on %q, num_retries %d: %+v", on, n, p)
		}
		p := parseRetryPolicy(retryPolicy(on, n), Options{RetryOn: testRetryOn})
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

// FuzzParseResetHeader: any reset header value (Retry-After,
// X-RateLimit-Reset) gives no interval or one that is not negative, the
// seconds it names when it is a number of seconds, and never a panic.
func FuzzParseResetHeader(f *testing.F) {
	f.Add("120", false)
	f.Add("Sun, 29 Nov 2026 01:00:30 GMT", false)
	f.Add(strconv.FormatInt(resetNow.Unix()+5, 10), true)
	f.Fuzz(func(t *testing.T, v string, unix bool) {
		d, ok := ParseResetHeader(v, unix, resetNow)
		if !ok {
			if d != 0 {
				t.Errorf("%q (unix %t): no interval, yet %v", v, unix, d)
			}
			return
		}
		if d < 0 {
			t.Errorf("%q (unix %t): %v", v, unix, d)
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil && !unix && d != time.Duration(n)*time.Second {
			t.Errorf("%q: %v; want %d s", v, d, n)
		}
	})
}
