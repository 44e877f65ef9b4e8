package route

import (
	"strconv"
	"time"
)

// NextGRPC decides whether a gRPC attempt that failed with status code
// code is retried, and after how long, once the adapter has found the
// attempt uncommitted (no response headers) and its failure not the
// picker's own (a drop): only a code the policy's retry_on names (the
// adapter's bits are gRPC's status codes, gRFC A44); the server's pushback
// (gRFC A6), the values of its grpc-retry-pushback-ms trailer, sets the
// wait instead of the backoff, and a pushback that is negative, malformed
// or repeated ends the retries, as grpc-go reads it; then Next.
func (s *RetryState) NextGRPC(p *RetryPolicy, code uint, pushback []string, u float64) (time.Duration, bool) {
	if !p.RetriesOn(code) {
		return 0, false
	}
	switch len(pushback) {
	case 0:
		return s.Next(p, 0, false, u)
	case 1:
		ms, err := strconv.Atoi(pushback[0])
		if err != nil || ms < 0 {
			return 0, false
		}
		return s.Next(p, time.Duration(ms)*time.Millisecond, true, u)
	}
	return 0, false
}
