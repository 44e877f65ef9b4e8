package main

import (
	"strings"
	"testing"

	"github.com/goxds/xds/internal/treeevents"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// A snapshot that renders as the one before prints nothing: no header over
// an empty diff. One that differs prints the header and the change.
func TestPrinterSaysNothingWhenNothingChanged(t *testing.T) {
	snap := func(rc string) *watchers.Snapshot {
		return &watchers.Snapshot{
			Listener:    &resources.Listener{Name: "svc", RouteConfigName: rc},
			RouteConfig: &resources.RouteConfig{Name: rc},
			VirtualHost: &resources.VirtualHost{Name: "vh", Domains: []string{"*"}},
			Clusters:    watchers.NewClusterMap(nil),
		}
	}
	var out strings.Builder
	p := &treeevents.Printer{W: &out, Render: render}
	p.Print(treeevents.Event{Snap: snap("r1")}, "first")
	first := out.String()
	if first == "" {
		t.Fatal("the first snapshot printed nothing")
	}
	p.Print(treeevents.Event{Snap: snap("r1")}, "same again")
	if got := strings.TrimPrefix(out.String(), first); got != "" {
		t.Fatalf("an unchanged snapshot printed %q, want nothing", got)
	}
	p.Print(treeevents.Event{Snap: snap("r2")}, "changed")
	got := strings.TrimPrefix(out.String(), first)
	if !strings.HasPrefix(got, "--- changed\n") || !strings.Contains(got, `+ listener "svc" → route config "r2"`) {
		t.Fatalf("a changed snapshot printed %q, want the header and the new line", got)
	}
}
