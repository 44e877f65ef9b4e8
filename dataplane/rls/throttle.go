package rls

import (
	"math"
	"time"
)

// Adaptive throttling of lookups, as gRPC's RLS design asks (client-side
// throttling from Google's SRE book, "Handling Overload"): over the last
// throttleWindow the client counts the lookups it wanted to send
// (requests) and those the service took and answered, an error answer
// (an *AnswerError) included (accepts), and refuses a new one with
// probability
//
//	max(0, (requests - throttleK*accepts) / (requests + throttlePadding))
//
// so that a failing service gets fewer lookups, while a healthy one is
// never throttled. A refused lookup counts as a request too.
const (
	throttleWindow  = 30 * time.Second
	throttleBins    = 100
	throttleK       = 2.0
	throttlePadding = 8.0
)

// throttler keeps the counts in throttleBins bins of throttleWindow /
// throttleBins each, in a ring. Guarded by the Policy's mu.
type throttler struct {
	bins [throttleBins]throttleBin
}

// throttleBin counts one slice of time, numbered since the Unix epoch.
type throttleBin struct {
	slot              int64
	requests, accepts int64
}

const throttleBinWidth = int64(throttleWindow / throttleBins)

// bin returns the bin of now, emptied if it last counted an older slice.
func (t *throttler) bin(now time.Time) *throttleBin {
	slot := now.UnixNano() / throttleBinWidth
	b := &t.bins[slot%throttleBins]
	if b.slot != slot {
		*b = throttleBin{slot: slot}
	}
	return b
}

// sums returns the counts of the window ending at now.
func (t *throttler) sums(now time.Time) (requests, accepts int64) {
	slot := now.UnixNano() / throttleBinWidth
	for i := range t.bins {
		if b := &t.bins[i]; b.slot > slot-throttleBins && b.slot <= slot {
			requests += b.requests
			accepts += b.accepts
		}
	}
	return requests, accepts
}

// allow counts a lookup the client wants to send, and says whether it
// may; draw is uniform in [0, 1).
func (t *throttler) allow(now time.Time, draw float64) bool {
	requests, accepts := t.sums(now)
	p := (float64(requests) - throttleK*float64(accepts)) / (float64(requests) + throttlePadding)
	t.bin(now).requests++
	return p <= draw
}

// answered counts a lookup the service answered.
func (t *throttler) answered(now time.Time) { t.bin(now).accepts++ }

// Backoff after failed lookups: gRPC's connection backoff (exponential
// from a second, by 1.6, to two minutes, each ±20%).
const (
	backoffBase   = time.Second
	backoffFactor = 1.6
	backoffMax    = 120 * time.Second
	backoffJitter = 0.2
)

// backoff is the wait after the retries-th failure in a row; draw is
// uniform in [0, 1).
func backoff(retries int, draw float64) time.Duration {
	d := float64(backoffBase) * math.Pow(backoffFactor, float64(retries))
	d = min(d, float64(backoffMax))
	d *= 1 + backoffJitter*(2*draw-1)
	return time.Duration(d)
}
