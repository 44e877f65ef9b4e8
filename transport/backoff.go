package transport

import (
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/backoff"
)

// backoffDelay is the wait before attempt number failures+1 after failures
// consecutive failed streams: exponential from BaseDelay, capped at
// MaxDelay, spread by Jitter so that a fleet does not reconnect in step.
func backoffDelay(cfg backoff.Config, failures int) time.Duration {
	if failures <= 0 {
		return 0
	}
	d := float64(cfg.BaseDelay)
	limit := float64(cfg.MaxDelay)
	for i := 1; i < failures && d < limit; i++ {
		d *= cfg.Multiplier
	}
	if d > limit {
		d = limit
	}
	d *= 1 + cfg.Jitter*(2*rand.Float64()-1)
	if d < 0 {
		return 0
	}
	return time.Duration(d)
}
