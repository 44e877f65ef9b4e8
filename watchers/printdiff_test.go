package watchers

import (
	"slices"
	"testing"
)

// DiffLines shows the lines that changed with the lines above them in the
// tree, and nothing for an unchanged tree.
func TestDiffLines(t *testing.T) {
	prev := []string{
		"listener L",
		"  route_config R",
		"    cluster A",
		"      endpoint 10.0.0.1:80",
		"    cluster B",
		"      endpoint 10.0.0.2:80",
	}
	next := []string{
		"listener L",
		"  route_config R",
		"    cluster A",
		"      endpoint 10.0.0.1:80",
		"    cluster B",
		"      endpoint 10.0.0.3:80",
	}
	want := []string{
		"  listener L",
		"    route_config R",
		"      cluster B",
		"-       endpoint 10.0.0.2:80",
		"+       endpoint 10.0.0.3:80",
	}
	if got := DiffLines(prev, next); !slices.Equal(got, want) {
		t.Errorf("DiffLines:\n%q\nwant\n%q", got, want)
	}
	if got := DiffLines(next, next); got != nil {
		t.Errorf("DiffLines of a tree and itself = %q, want nil", got)
	}
}
