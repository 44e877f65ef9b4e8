package grpcxds

import (
	"time"

	"github.com/goxds/xds/dataplane/lbpolicy"
)

// clock is what the balancer's timers (outlier detection, failover, idle
// sweeps, pick_first's turns) need of time, for tests to replace: the
// policies' own, so that one clock serves them all.
type clock = lbpolicy.Clock

// stopper is a timer.
type stopper = lbpolicy.Timer

type realClock struct{}

func (realClock) Now() time.Time                              { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }
