package test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goxds/xds/client"
)

// Helpers of the fault suites (faults_test.go, garbage_test.go,
// flood_test.go, logs_test.go).

// leakLabel is the pprof label checkLeaks puts on a test's goroutines.
const leakLabel = "goxds_test"

// checkLeaks attributes goroutine leaks to the test that made them, even
// among parallel tests, which goleak.VerifyNone cannot do (it sees every
// test's goroutines). It labels the calling goroutine with the test's name;
// every goroutine started from it, and from those, inherits the label: the
// client's serializer and transport runner, gRPC's connection goroutines,
// the servers' handlers. Once the test and its other cleanups are done, none
// may be left. Call it first, right after t.Parallel, so that its check is
// the last cleanup to run.
//
// goleak.VerifyTestMain still runs over the whole package, for goroutines
// started where no label reaches (time.AfterFunc callbacks).
func checkLeaks(t *testing.T) {
	t.Helper()
	name := t.Name()
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels(leakLabel, name)))
	t.Cleanup(func() {
		// This goroutine carries the label too; it is not a leak.
		pprof.SetGoroutineLabels(context.Background())
		deadline := time.Now().Add(5 * time.Second)
		for {
			left := labelledGoroutines(name)
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("goroutines of %s still running after it ended:\n%s", name, strings.Join(left, "\n\n"))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// labelledGoroutines returns the stacks of the goroutines labelled with
// test, from the goroutine profile.
func labelledGoroutines(test string) []string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return []string{err.Error()}
	}
	want := fmt.Sprintf("# labels: {%q:%q}", leakLabel, test)
	var out []string
	for _, block := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(block, want+"\n") {
			out = append(out, block)
		}
	}
	return out
}

// newFaultClient is newClient with options of the test's choosing: mod
// edits the defaults (no does-not-exist timer, fast reconnection, the test
// logger) before the client is made.
func newFaultClient(t *testing.T, addr string, p protocol, mod func(*client.Options)) *client.Client {
	t.Helper()
	b, err := bootstrapFor(addr, p, config{})
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	opts := client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: testLogger()}
	if mod != nil {
		mod(&opts)
	}
	c, err := client.New(b, opts)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// metrics records what a client reports through client.Metrics.
type metrics struct {
	mu        sync.Mutex
	updates   []updateCount // every ResourceUpdates call
	failures  int           // ServerFailure calls
	connected []bool        // Connected calls, in order
}

type updateCount struct {
	typeURL        string
	valid, invalid int
}

func (m *metrics) ResourceUpdates(_, typeURL string, valid, invalid int) {
	m.mu.Lock()
	m.updates = append(m.updates, updateCount{typeURL, valid, invalid})
	m.mu.Unlock()
}

func (m *metrics) ServerFailure(string) {
	m.mu.Lock()
	m.failures++
	m.mu.Unlock()
}

func (m *metrics) Connected(_ string, c bool) {
	m.mu.Lock()
	m.connected = append(m.connected, c)
	m.mu.Unlock()
}

// counts sums what was reported: responses handled, valid and invalid
// resources, server failures, and the Connected calls.
func (m *metrics) counts() (responses, valid, invalid, failures int, connected []bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range m.updates {
		valid += u.valid
		invalid += u.invalid
	}
	return len(m.updates), valid, invalid, m.failures, append([]bool(nil), m.connected...)
}

// memSampler samples the heap and the goroutine count while a load runs.
type memSampler struct {
	stop chan struct{}
	done chan struct{}
	// Written by the sampler goroutine, read after done.
	peakHeap       uint64
	peakGoroutines int
	samples        int
}

// sampleMemory reads runtime.MemStats every interval until Stop.
func sampleMemory(every time.Duration) *memSampler {
	m := &memSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			m.peakHeap = max(m.peakHeap, ms.HeapAlloc)
			m.peakGoroutines = max(m.peakGoroutines, runtime.NumGoroutine())
			m.samples++
			select {
			case <-tick.C:
			case <-m.stop:
				return
			}
		}
	}()
	return m
}

// Stop ends the sampling and waits for the sampler.
func (m *memSampler) Stop() {
	close(m.stop)
	<-m.done
}

// settledHeap collects garbage and returns the live heap.
func settledHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// settledGoroutines waits until the number of goroutines is at most want,
// and returns the count it settled on (above want once the wait ran out).
func settledGoroutines(want int, wait time.Duration) int {
	deadline := time.Now().Add(wait)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logRecord is one log line as a captureHandler saw it, with the attributes
// of the logger (With) and of the line, flattened.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r logRecord) String() string { return fmt.Sprintf("%v %q %v", r.level, r.msg, r.attrs) }

// captureHandler is a slog.Handler that keeps every record, at every level.
type captureHandler struct {
	sink  *logSink
	attrs []slog.Attr
	group string
}

type logSink struct {
	mu      sync.Mutex
	records []logRecord
}

func newCaptureLogger() (*slog.Logger, *logSink) {
	s := &logSink{}
	return slog.New(&captureHandler{sink: s}), s
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: make(map[string]string)}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		key := a.Key
		if h.group != "" {
			key = h.group + "." + key
		}
		rec.attrs[key] = a.Value.String()
		return true
	})
	h.sink.mu.Lock()
	h.sink.records = append(h.sink.records, rec)
	h.sink.mu.Unlock()
	return nil
}

func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := *h
	h2.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &h2
}

func (h *captureHandler) WithGroup(name string) slog.Handler {
	h2 := *h
	h2.group = name
	return &h2
}

func (s *logSink) all() []logRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logRecord(nil), s.records...)
}

// waitFor polls cond until it holds or the timeout runs out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
