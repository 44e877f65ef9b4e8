package main

import (
	"fmt"
	"io"

	"github.com/goxds/xds/watchers"
)

// render draws a snapshot as watchers prints it, one line per element.
func render(s *watchers.Snapshot) []string { return s.Lines() }

// printer prints events: the first snapshot, and any after an error, in
// full; later ones as the lines that changed, with the lines above them
// in the tree for context.
type printer struct {
	w    io.Writer
	prev []string // the tree printed last; nil after a ResourceError
}

func (p *printer) print(ev event, title string) {
	switch {
	case ev.ambient:
		fmt.Fprintf(p.w, "warning: %v (the tree above stays in force)\n", ev.err)
	case ev.err != nil:
		fmt.Fprintf(p.w, "error: %v\n", ev.err)
		p.prev = nil
	case p.prev == nil:
		lines := render(ev.snap)
		for _, l := range lines {
			fmt.Fprintln(p.w, l)
		}
		p.prev = lines
	default:
		lines := render(ev.snap)
		changes := watchers.DiffLines(p.prev, lines)
		p.prev = lines
		if len(changes) == 0 {
			// A new snapshot can render the same: a resource resent with
			// another version, or a change to a field the tree does not show.
			return
		}
		fmt.Fprintf(p.w, "--- %s\n", title)
		for _, l := range changes {
			fmt.Fprintln(p.w, l)
		}
	}
}
