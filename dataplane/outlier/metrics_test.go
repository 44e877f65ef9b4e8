package outlier

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recorder is a Metrics that counts what it hears, by
// "backend/method/reason" ("enforced" for an ejection), and fails the
// test if it hears it under the owner's lock.
type recorder struct {
	t     *testing.T
	owner *sync.Mutex
	mu    sync.Mutex
	got   map[string]int
}

func (r *recorder) add(key string) {
	if !r.owner.TryLock() {
		r.t.Errorf("%s reported under the owner's lock", key)
	} else {
		r.owner.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got[key]++
}

func (r *recorder) EjectionEnforced(backendService, method string) {
	r.add(fmt.Sprintf("%s/%s/enforced", backendService, method))
}

func (r *recorder) EjectionUnenforced(backendService, method, reason string) {
	r.add(fmt.Sprintf("%s/%s/%s", backendService, method, reason))
}

func (r *recorder) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = map[string]int{}
	return got
}

// Each outlier an algorithm finds is counted once the interval ends and
// the owner's lock is released (gRFC A91): ejected, or left in by the
// enforcing percentage or by max_ejection_percent, by the algorithm that
// found it, labelled with the detector's backend service. An already
// ejected endpoint found again is not counted; nor is an interval that
// finds none.
func TestMetrics(t *testing.T) {
	r := &recorder{t: t, got: map[string]int{}}
	// Five endpoints, a and b failing every request: the success rate
	// algorithm (one standard deviation) finds both and enforces none;
	// the failure percentage algorithm finds both and may eject one (20%).
	h := newMeasuredHarness(t, 5, Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute,
		MaxEjectionPercent: 20,
		SuccessRate:        &SuccessRate{StdevFactor: 1000, Enforcement: 0, MinimumHosts: 5, RequestVolume: 10},
		FailurePercentage:  &FailurePercentage{Threshold: 50, Enforcement: 100, MinimumHosts: 5, RequestVolume: 10}},
		r, "leaf-a")
	r.owner = &h.mu
	h.calls([2]int{0, 20}, [2]int{0, 20}, [2]int{20, 0}, [2]int{20, 0}, [2]int{20, 0})
	if !h.end(time.Second) || h.nEjected() != 1 {
		t.Fatalf("%d endpoints ejected, want 1", h.nEjected())
	}
	want := map[string]int{
		"leaf-a/failure_percentage/enforced":              1,
		"leaf-a/failure_percentage/max_ejection_overflow": 1,
		"leaf-a/success_rate/enforcement_percentage":      2,
	}
	if diff := cmp.Diff(want, r.take()); diff != "" {
		t.Errorf("the first interval's outliers (-want +got):\n%s", diff)
	}
	// The same failures again (the ejected one's requests were under
	// way): the ejected one is out already and not counted; the other is
	// found by both algorithms again, and the cap stops both before the
	// enforcing percentage is drawn.
	h.calls([2]int{0, 20}, [2]int{0, 20}, [2]int{20, 0}, [2]int{20, 0}, [2]int{20, 0})
	h.end(time.Second)
	want = map[string]int{
		"leaf-a/failure_percentage/max_ejection_overflow": 1,
		"leaf-a/success_rate/max_ejection_overflow":       1,
	}
	if diff := cmp.Diff(want, r.take()); diff != "" {
		t.Errorf("the second interval's outliers (-want +got):\n%s", diff)
	}
	h.end(time.Second)
	if got := r.take(); len(got) != 0 {
		t.Errorf("an interval with no requests counted %v", got)
	}
}
