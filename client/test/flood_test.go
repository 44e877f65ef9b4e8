package test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Load faults, ten seconds each, on SotW and delta at once against
// go-control-plane: a flood of updates to one resource, and watches opened
// and cancelled by the ten thousand. They measure the heap and the
// goroutines, so they are not parallel: while they run, every parallel test
// of the package waits.

const loadDuration = 10 * time.Second

// heapMargin is how much more live heap a load may leave behind than it
// found, once garbage is collected: noise (runtime and gRPC buffers, the
// servers' bookkeeping), far below what a leak of the load would hold.
const heapMargin = 4 << 20

// peakMargin bounds the heap, garbage included, while a load runs: what
// the garbage collector lets accumulate between cycles (GOGC=100 doubles a
// small live heap), plus the messages in flight. A client that held on to
// what passes through it would blow it within seconds.
const peakMargin = 64 << 20

// latestWatcher keeps only the version it was given last: a watcher that
// never blocks the client, as a real consumer of a flood would be.
type latestWatcher struct {
	mu          sync.Mutex
	last        int // the N of the last EDS name "eds-N" received
	updates     int
	errs        int
	regressions int // updates not newer than the one before
}

func (l *latestWatcher) Update(c *resources.Cluster) {
	n, _ := strconv.Atoi(strings.TrimPrefix(c.EDSServiceName(), "eds-"))
	l.mu.Lock()
	if n <= l.last {
		l.regressions++
	}
	l.last = n
	l.updates++
	l.mu.Unlock()
}

func (l *latestWatcher) ResourceError(error) { l.mu.Lock(); l.errs++; l.mu.Unlock() }
func (l *latestWatcher) AmbientError(error)  { l.mu.Lock(); l.errs++; l.mu.Unlock() }

func (l *latestWatcher) state() (last, updates, errs, regressions int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last, l.updates, l.errs, l.regressions
}

// allAt tells whether every watcher's last version is n.
func allAt(ws []*latestWatcher, n int) bool {
	for _, w := range ws {
		if last, _, _, _ := w.state(); last != n {
			return false
		}
	}
	return true
}

// floodEnv is one variant of the flood: a server, a client, its watchers.
type floodEnv struct {
	p        protocol
	ms       *testutils.ManagementServer
	c        *client.Client
	watchers []*latestWatcher
	sent     int           // versions the server was given
	behind   time.Duration // how late the producer ended, at worst
	caughtUp time.Duration // from the last version to every watcher having it
}

func floodVersion(i int) testutils.Resources {
	return testutils.Resources{Clusters: []*clusterv3.Cluster{testutils.Cluster("C1", fmt.Sprint("eds-", i))}}
}

// One resource updated 1,000 times a second for ten seconds. The server
// (go-control-plane) coalesces what the client has not ACKed yet, the client
// reads a response only once its watchers have had the previous one: the
// watchers see versions in order, never an old one after a newer, and the
// latest within recoveryBound of the last update. Memory stays flat: the
// live heap after the flood is the live heap before it, within heapMargin,
// and the goroutines are those before it.
func TestFloodOneResource(t *testing.T) {
	checkLeaks(t)
	const rate = 1000
	envs := make([]*floodEnv, 0, len(protocols))
	for _, p := range protocols {
		fe := &floodEnv{p: p, ms: startManagementServer(t, floodVersion(0))}
		fe.c = newFaultClient(t, fe.ms.Address(), p, nil)
		for range 10 {
			w := &latestWatcher{last: -1}
			fe.watchers = append(fe.watchers, w)
			client.WatchCluster(fe.c, "C1", w)
		}
		waitFor(t, "the first version", func() bool { return allAt(fe.watchers, 0) })
		envs = append(envs, fe)
	}
	goroutinesBefore := settledGoroutines(0, 0)
	heapBefore := settledHeap()
	sampler := sampleMemory(20 * time.Millisecond)

	start := time.Now()
	var wg sync.WaitGroup
	for _, fe := range envs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), loadDuration+timeout)
			defer cancel()
			for i := 1; ; i++ {
				due := start.Add(time.Duration(i) * time.Second / rate)
				if due.Sub(start) > loadDuration {
					break
				}
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				} else {
					fe.behind = max(fe.behind, -d)
				}
				if err := fe.ms.Update(ctx, nodeID, floodVersion(i)); err != nil {
					t.Errorf("%s: update %d: %v", fe.p.name, i, err)
					return
				}
				fe.sent = i
			}
			end := time.Now()
			for !allAt(fe.watchers, fe.sent) {
				if time.Since(end) > timeout {
					t.Errorf("%s: the watchers never got the last version", fe.p.name)
					return
				}
				time.Sleep(time.Millisecond)
			}
			fe.caughtUp = time.Since(end)
		})
	}
	wg.Wait()
	sampler.Stop()
	heapAfter := settledHeap()
	goroutinesAfter := settledGoroutines(goroutinesBefore, 2*time.Second)

	for _, fe := range envs {
		c := fe.ms.Counters()
		responses := c.Responses + c.DeltaResponses
		_, updates, _, _ := fe.watchers[0].state()
		t.Logf("%s: %d versions in %v (%.0f/s, producer at worst %v late); %d responses sent; each watcher got %d updates; the last reached every watcher %v after it was made",
			fe.p.name, fe.sent, loadDuration, float64(fe.sent)/loadDuration.Seconds(), fe.behind.Round(time.Millisecond), responses, updates, fe.caughtUp.Round(time.Millisecond))
		if fe.sent < rate*int(loadDuration/time.Second)*9/10 {
			t.Errorf("%s: only %d versions made in %v: the flood did not happen", fe.p.name, fe.sent, loadDuration)
		}
		if fe.caughtUp > recoveryBound {
			t.Errorf("%s: the last version reached every watcher %v after it was made, want within %v", fe.p.name, fe.caughtUp, recoveryBound)
		}
		for i, w := range fe.watchers {
			last, _, errs, regressions := w.state()
			if last != fe.sent || errs != 0 || regressions != 0 {
				t.Errorf("%s: watcher %d ended at version %d with %d errors and %d updates out of order; want %d, none, none",
					fe.p.name, i, last, errs, regressions, fe.sent)
			}
		}
		if d := fe.c.Dump(); len(d) != 1 || d[0].Status != client.StatusACKed {
			t.Errorf("%s: dump %+v, want C1 alone, ACKED", fe.p.name, d)
		}
	}
	t.Logf("heap: %s live before, peak %s during, %s live after; goroutines: %d before, peak %d, %d after (%d samples)",
		mib(heapBefore), mib(sampler.peakHeap), mib(heapAfter), goroutinesBefore, sampler.peakGoroutines, goroutinesAfter, sampler.samples)
	if heapAfter > heapBefore+heapMargin {
		t.Errorf("live heap grew from %s to %s over the flood, more than %s", mib(heapBefore), mib(heapAfter), mib(heapMargin))
	}
	if sampler.peakHeap > heapBefore+peakMargin {
		t.Errorf("the heap peaked at %s during the flood, more than %s above the %s before", mib(sampler.peakHeap), mib(peakMargin), mib(heapBefore))
	}
	if goroutinesAfter > goroutinesBefore {
		t.Errorf("%d goroutines after the flood, %d before", goroutinesAfter, goroutinesBefore)
	}
}

// manyEnv is one variant of the many-watchers test.
type manyEnv struct {
	p      protocol
	ms     *testutils.ManagementServer
	c      *client.Client
	cycles int
	opened int
}

// Names of the many-watchers test: clusters and endpoints c0…c499, of which
// the server has c0…c99. The rest never arrive: their does-not-exist timers
// (an hour) run until the watches are cancelled.
const (
	manyNames    = 500
	manyExisting = 100
	manyPerName  = 10 // watchers of each name of each type
	// manyRounds bounds the rounds, each of which watches a cluster of its
	// own that the server holds from the start: the loop ends after this
	// many rounds or loadDuration, whichever comes first, so that a fast
	// client finishes early rather than runs out of clusters.
	manyRounds = 1000
	// manyMinRounds is the fewest rounds run, past loadDuration if need be.
	manyMinRounds = 3
)

// openMany opens manyNames×manyPerName watches of clusters and as many of
// endpoints, 10,000 in all, from four goroutines at once, and one of the
// cluster "round-N", a name no earlier round watched. It returns their
// cancels and a channel closed once that one has its value: the round's
// subscriptions have reached the server and its answer the watchers.
//
// The sentinel is a fresh name because a name unsubscribed and subscribed
// again quickly may, over SotW, not be sent again by go-control-plane until
// it changes: the server ignores a request whose nonce is stale, removal
// included (see envoy issue 10363), so it may never learn the client
// dropped it. TestRewatchRightAfterCancel covers what the client controls.
func openMany(c *client.Client, round int) (cancels []func(), arrived chan struct{}) {
	arrived = make(chan struct{})
	sentinel := client.WatcherFuncs[*resources.Cluster]{OnUpdate: func(*resources.Cluster) { close(arrived) }}
	nop := client.WatcherFuncs[*resources.Cluster]{}
	nopE := client.WatcherFuncs[*resources.Endpoints]{}
	const workers = 4
	parts := make([][]func(), workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < manyNames*manyPerName; i += workers {
				name := fmt.Sprint("c", i%manyNames)
				parts[w] = append(parts[w], client.WatchCluster(c, name, nop), client.WatchEndpoints(c, name, nopE))
			}
		})
	}
	wg.Wait()
	for _, p := range parts {
		cancels = append(cancels, p...)
	}
	return append(cancels, client.WatchCluster(c, fmt.Sprint("round-", round), sentinel)), arrived
}

// cancelAll cancels from four goroutines at once.
func cancelAll(cancels []func()) {
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(cancels); i += 4 {
				cancels[i]()
			}
		})
	}
	wg.Wait()
}

// 10,000 watches (5,000 clusters, 5,000 endpoints, ten watchers a name, a
// fifth of the names served) opened and cancelled in a loop for ten
// seconds (and at least manyMinRounds rounds) or manyRounds rounds,
// whichever ends first, from several
// goroutines at once; each round waits until the server's answer was
// delivered, so that every round subscribes, receives, starts
// does-not-exist timers and unsubscribes. Afterwards nothing is
// left: the cache is empty (so no entry holds a timer), the goroutines are
// those before, and the live heap is what it was, within heapMargin, though
// a leaked timer of an hour would hold its entry.
func TestManyWatchersOpenedAndCancelled(t *testing.T) {
	checkLeaks(t)
	var served []string
	for i := range manyExisting {
		served = append(served, fmt.Sprint("c", i))
	}
	rs := testutils.DefaultResources(testutils.ResourceParams{ClusterNames: served})
	for i := range manyRounds {
		rs.Clusters = append(rs.Clusters, testutils.Cluster(fmt.Sprint("round-", i), ""))
	}
	envs := make([]*manyEnv, 0, len(protocols))
	for _, p := range protocols {
		me := &manyEnv{p: p, ms: startManagementServer(t, rs)}
		me.c = newFaultClient(t, me.ms.Address(), p, nil)
		// A first round starts the stream, which outlives the watches.
		cancels, arrived := openMany(me.c, 0)
		me.cycles++
		select {
		case <-arrived:
		case <-time.After(timeout):
			t.Fatalf("%s: c0 never arrived", p.name)
		}
		cancelAll(cancels)
		envs = append(envs, me)
	}
	goroutinesBefore := settledGoroutines(0, 0)
	heapBefore := settledHeap()
	sampler := sampleMemory(20 * time.Millisecond)

	start := time.Now()
	var wg sync.WaitGroup
	for _, me := range envs {
		wg.Go(func() {
			// At least manyMinRounds whatever the time (each has its own
			// deadline), so that a slow machine still cycles the watches
			// more than once rather than fails for want of rounds.
			for me.cycles < manyRounds && (me.cycles < manyMinRounds || time.Since(start) < loadDuration) {
				cancels, arrived := openMany(me.c, me.cycles)
				select {
				case <-arrived:
				case <-time.After(timeout):
					t.Errorf("%s: round %d: c0 never arrived", me.p.name, me.cycles+1)
					cancelAll(cancels)
					return
				}
				cancelAll(cancels)
				me.cycles++
				me.opened += len(cancels) - 1 // the sentinel aside
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	sampler.Stop()
	for _, me := range envs {
		barrier(t, me.c) // entries go once their unsubscription is flushed
		if d := me.c.Dump(); len(d) != 0 {
			t.Errorf("%s: %d resources still cached after every watch was cancelled, e.g. %+v", me.p.name, len(d), d[0])
		}
		if n := me.c.ResourceCounts(); len(n) != 0 {
			t.Errorf("%s: resource counts %+v after every watch was cancelled, want none", me.p.name, n)
		}
		t.Logf("%s: %d rounds, %d watches opened and cancelled in %v (%.0f/s)",
			me.p.name, me.cycles-1, me.opened, elapsed.Round(time.Millisecond), float64(me.opened)/elapsed.Seconds())
	}
	goroutinesAfter := settledGoroutines(goroutinesBefore, 2*time.Second)
	heapAfter := settledHeap()
	t.Logf("heap: %s live before, peak %s during, %s live after; goroutines: %d before, peak %d, %d after (%d samples)",
		mib(heapBefore), mib(sampler.peakHeap), mib(heapAfter), goroutinesBefore, sampler.peakGoroutines, goroutinesAfter, sampler.samples)
	if heapAfter > heapBefore+heapMargin {
		t.Errorf("live heap grew from %s to %s, more than %s", mib(heapBefore), mib(heapAfter), mib(heapMargin))
	}
	if sampler.peakHeap > heapBefore+peakMargin {
		t.Errorf("the heap peaked at %s, more than %s above the %s before", mib(sampler.peakHeap), mib(peakMargin), mib(heapBefore))
	}
	if goroutinesAfter > goroutinesBefore {
		t.Errorf("%d goroutines after the loop, %d before", goroutinesAfter, goroutinesBefore)
	}
}
