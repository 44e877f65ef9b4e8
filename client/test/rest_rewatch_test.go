package test

import (
	"testing"
	"time"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Over REST, a name watched, given up (polling stops: nothing else is
// wanted) and watched again has its does-not-exist timer started again once
// the poll naming it is written; the poller used to take the name for one
// it had reported already, and the watcher of a missing resource waited
// for ever.
func TestRESTRewatchAfterPollingStoppedTimesOut(t *testing.T) {
	t.Parallel()
	checkLeaks(t)
	clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
	e := newE2E(t, variant{name: "rest", p: rest}, config{expiry: expiry, clock: clk}, testutils.ManagementServerOptions{}, svc(1001))
	notFound := func(cancelAfter bool) {
		t.Helper()
		w := newRecorder[*resources.Cluster]()
		cancel := client.WatchCluster(e.c, "other", w)
		if err := clk.WaitForTimers(testContext(t), 1); err != nil {
			t.Fatalf("no does-not-exist timer: %v", err)
		}
		clk.Advance(expiry)
		w.wantNotFound(t, "other")
		if cancelAfter {
			cancel()
			barrier(t, e.c) // the removal is flushed: polling stops
		}
	}
	notFound(true)
	notFound(false)
}
