package route

import (
	"testing"
	"time"
)

// A gRPC attempt is retried on the policy's codes only; the server's
// pushback sets the wait, and one that is negative, malformed or repeated
// stops the retries (gRFC A6).
func TestNextGRPC(t *testing.T) {
	const unavailable, internal = 14, 13
	p := &RetryPolicy{On: 1 << unavailable, MaxAttempts: 3, Base: time.Second, Max: 3 * time.Second}
	for _, tc := range []struct {
		name     string
		code     uint
		pushback []string
		want     time.Duration
		ok       bool
	}{
		{"policy's code, no pushback", unavailable, nil, time.Second, true},
		{"code the policy does not name", internal, nil, 0, false},
		{"code past the bits", 100, nil, 0, false},
		{"pushback", unavailable, []string{"7"}, 7 * time.Millisecond, true},
		{"zero pushback", unavailable, []string{"0"}, 0, true},
		{"negative pushback", unavailable, []string{"-1"}, 0, false},
		{"malformed pushback", unavailable, []string{"7ms"}, 0, false},
		{"repeated pushback", unavailable, []string{"7", "8"}, 0, false},
		{"pushback on a code the policy does not name", internal, []string{"7"}, 0, false},
	} {
		s := RetryState{Attempts: 1}
		d, ok := s.NextGRPC(p, tc.code, tc.pushback, 0.5)
		if d != tc.want || ok != tc.ok {
			t.Errorf("%s: NextGRPC = %v, %v; want %v, %v", tc.name, d, ok, tc.want, tc.ok)
		}
	}
	s := RetryState{Attempts: 3}
	if _, ok := s.NextGRPC(p, unavailable, []string{"7"}, 0.5); ok {
		t.Error("retried past MaxAttempts, with a pushback")
	}
}
