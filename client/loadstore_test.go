package client

import (
	"sync"
	"testing"
	"time"

	"github.com/goxds/xds/resources"
)

// stepClock is a Clock whose time moves only when the test says; its
// timers never fire (the store uses only Now).
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (*stepClock) AfterFunc(time.Duration, func()) Timer { return nil }

// TestLoadStoreConcurrent records RPCs and drops from many goroutines while
// reports are taken, and checks that the reports together count every RPC
// exactly once: a count is never lost or reported twice across the reset.
func TestLoadStoreConcurrent(t *testing.T) {
	t.Parallel()
	clock := &stepClock{now: time.Unix(0, 0)}
	s := newLoadStore(clock)
	const workers, rpcs = 8, 2000
	loc := resources.LocalityID{Zone: "z"}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := s.Cluster("c", "svc")
			l := cl.Locality(loc)
			for i := range rpcs {
				l.CallStarted()
				l.CallFinished((i+w)%3 == 0)
				if i%10 == 0 {
					cl.CallDropped("lb")
				}
			}
		}()
	}
	var issued, succeeded, errored, drops, total uint64
	var reported time.Duration
	collect := func() {
		for _, cs := range s.LoadStats(nil, true) {
			for _, ls := range cs.UpstreamLocalityStats {
				issued += ls.TotalIssuedRequests
				succeeded += ls.TotalSuccessfulRequests
				errored += ls.TotalErrorRequests
			}
			for _, d := range cs.DroppedRequests {
				drops += d.DroppedCount
			}
			total += cs.TotalDroppedRequests
			reported += cs.LoadReportInterval.AsDuration()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		clock.advance(time.Second)
		collect()
	}
	clock.advance(time.Second)
	collect()
	var wantErr uint64
	for w := range workers {
		for i := range rpcs {
			if (i+w)%3 == 0 {
				wantErr++
			}
		}
	}
	if want := uint64(workers * rpcs); issued != want || succeeded+errored != want || errored != wantErr {
		t.Errorf("reports counted issued %d, succeeded %d, errored %d; want issued %d, errored %d, succeeded %d",
			issued, succeeded, errored, want, wantErr, want-wantErr)
	}
	if want := uint64(workers * rpcs / 10); drops != want || total != want {
		t.Errorf("reports counted %d drops of category lb, %d in all; want %d", drops, total, want)
	}
	if reported > clock.Now().Sub(time.Unix(0, 0)) {
		t.Errorf("report intervals sum to %v, more than the %v that passed", reported, clock.Now().Sub(time.Unix(0, 0)))
	}
	if got := s.LoadStats(nil, true); len(got) != 0 {
		t.Errorf("a report with nothing new: %v, want none", got)
	}
}

// TestLoadStoreInProgress checks that an RPC in progress is reported in
// every interval until it finishes, and that a cluster the server did not
// name keeps its load for a later report.
func TestLoadStoreInProgress(t *testing.T) {
	t.Parallel()
	clock := &stepClock{now: time.Unix(0, 0)}
	s := newLoadStore(clock)
	l := s.Cluster("a", "").Locality(resources.LocalityID{Region: "r"})
	l.CallStarted()
	s.Cluster("b", "").CallDropped("")
	for i := range 2 {
		clock.advance(time.Second)
		got := s.LoadStats([]string{"a"}, false)
		if len(got) != 1 || got[0].ClusterName != "a" || got[0].UpstreamLocalityStats[0].TotalRequestsInProgress != 1 ||
			got[0].UpstreamLocalityStats[0].TotalIssuedRequests != uint64(1-i) || got[0].LoadReportInterval.AsDuration() != time.Second {
			t.Fatalf("report %d of a: %v", i, got)
		}
	}
	l.CallFinished(false)
	clock.advance(time.Second)
	got := s.LoadStats([]string{"a", "b"}, false)
	if len(got) != 2 {
		t.Fatalf("report of a and b: %v, want both", got)
	}
	for _, cs := range got {
		switch cs.ClusterName {
		case "a":
			if ls := cs.UpstreamLocalityStats[0]; ls.TotalSuccessfulRequests != 1 || ls.TotalRequestsInProgress != 0 {
				t.Errorf("a: %v, want 1 succeeded, none in progress", cs)
			}
		case "b":
			if cs.TotalDroppedRequests != 1 || len(cs.DroppedRequests) != 0 || cs.LoadReportInterval.AsDuration() != 3*time.Second {
				t.Errorf("b: %v, want 1 uncategorized drop over 3s", cs)
			}
		}
	}
}

// BenchmarkLoadStoreRecord is the cost of recording one RPC (start and
// finish) on a locality looked up beforehand, as a picker does, from
// parallel goroutines.
func BenchmarkLoadStoreRecord(b *testing.B) {
	l := newLoadStore(realClock{}).Cluster("c", "").Locality(resources.LocalityID{Zone: "z"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.CallStarted()
			l.CallFinished(false)
		}
	})
}

// BenchmarkLoadStoreDrop is the cost of recording one drop of a known
// category.
func BenchmarkLoadStoreDrop(b *testing.B) {
	cl := newLoadStore(realClock{}).Cluster("c", "")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			cl.CallDropped("lb")
		}
	})
}

// TestLoadStoreServerLoad checks how backend metrics are reported: the
// utilizations in their own fields, other names in load_metric_stats, each
// with the count of RPCs that reported it and the sum; then reset.
func TestLoadStoreServerLoad(t *testing.T) {
	t.Parallel()
	clock := &stepClock{now: time.Unix(0, 0)}
	s := newLoadStore(clock)
	l := s.Cluster("c", "").Locality(resources.LocalityID{Zone: "z"})
	for _, v := range []float64{0.5, 0.75} {
		l.CallStarted()
		l.CallFinished(false)
		l.CallServerLoad("cpu_utilization", v)
	}
	l.CallServerLoad("application_utilization", 0.25)
	l.CallServerLoad("named_metrics.queue", 3)
	got := s.LoadStats(nil, true)
	if len(got) != 1 || len(got[0].UpstreamLocalityStats) != 1 {
		t.Fatalf("report: %v", got)
	}
	ls := got[0].UpstreamLocalityStats[0]
	if c := ls.CpuUtilization; c.GetNumRequestsFinishedWithMetric() != 2 || c.GetTotalMetricValue() != 1.25 {
		t.Errorf("cpu_utilization: %v, want 2 RPCs summing 1.25", c)
	}
	if a := ls.ApplicationUtilization; a.GetNumRequestsFinishedWithMetric() != 1 || a.GetTotalMetricValue() != 0.25 {
		t.Errorf("application_utilization: %v, want 1 RPC, 0.25", a)
	}
	if ls.MemUtilization != nil {
		t.Errorf("mem_utilization: %v, want none reported", ls.MemUtilization)
	}
	if m := ls.LoadMetricStats; len(m) != 1 || m[0].MetricName != "named_metrics.queue" || m[0].NumRequestsFinishedWithMetric != 1 || m[0].TotalMetricValue != 3 {
		t.Errorf("load_metric_stats: %v, want named_metrics.queue: 1 RPC, 3", m)
	}
	if got := s.LoadStats(nil, true); len(got) != 0 {
		t.Errorf("second report: %v, want none", got)
	}
}

// CallUnstarted takes back a CallStarted: not in progress, not issued,
// unless a report already counted it issued (never below zero).
func TestLoadStoreCallUnstarted(t *testing.T) {
	t.Parallel()
	clock := &stepClock{now: time.Unix(0, 0)}
	s := newLoadStore(clock)
	l := s.Cluster("a", "").Locality(resources.LocalityID{Region: "r"})
	l.CallStarted()
	l.CallStarted()
	l.CallUnstarted()
	clock.advance(time.Second)
	got := s.LoadStats([]string{"a"}, false)
	if len(got) != 1 || got[0].UpstreamLocalityStats[0].TotalIssuedRequests != 1 || got[0].UpstreamLocalityStats[0].TotalRequestsInProgress != 1 {
		t.Fatalf("two started, one taken back: %v, want 1 issued, 1 in progress", got)
	}
	l.CallUnstarted() // after the report that counted it issued
	l.CallStarted()
	l.CallFinished(false)
	clock.advance(time.Second)
	got = s.LoadStats([]string{"a"}, false)
	if len(got) != 1 || got[0].UpstreamLocalityStats[0].TotalIssuedRequests != 1 || got[0].UpstreamLocalityStats[0].TotalRequestsInProgress != 0 ||
		got[0].UpstreamLocalityStats[0].TotalSuccessfulRequests != 1 {
		t.Fatalf("the reported one taken back, another started and finished: %v, want 1 issued (the new one: the count does not wrap), 0 in progress, 1 succeeded", got)
	}
}
