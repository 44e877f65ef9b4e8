package outlier_test

import (
	"slices"
	"testing"

	"github.com/goxds/xds/dataplane/outlier"
)

// targetRecorder is a TargetMetrics that keeps what it hears.
type targetRecorder struct{ heard []string }

func (r *targetRecorder) EjectionEnforced(target, backendService, method string) {
	r.heard = append(r.heard, target+" "+backendService+" "+method+" enforced")
}

func (r *targetRecorder) EjectionUnenforced(target, backendService, method, reason string) {
	r.heard = append(r.heard, target+" "+backendService+" "+method+" unenforced: "+reason)
}

// WithTarget hands what a detector reports on with the client's target;
// a nil TargetMetrics is no Metrics, not one that fails when called.
func TestWithTarget(t *testing.T) {
	if m := outlier.WithTarget(nil, "t"); m != nil {
		t.Errorf("WithTarget(nil) = %v, want nil", m)
	}
	rec := &targetRecorder{}
	m := outlier.WithTarget(rec, "xds:///svc")
	m.EjectionEnforced("c", outlier.MethodSuccessRate)
	m.EjectionUnenforced("c", outlier.MethodFailurePercentage, outlier.ReasonMaxEjectionOverflow)
	want := []string{"xds:///svc c success_rate enforced", "xds:///svc c failure_percentage unenforced: max_ejection_overflow"}
	if !slices.Equal(rec.heard, want) {
		t.Errorf("heard %q, want %q", rec.heard, want)
	}
}
