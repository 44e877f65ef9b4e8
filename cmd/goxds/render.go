package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/goxds/xds/watchers"
)

// indent is one level of the printed tree (watchers' printer indents
// so).
const indent = "  "

// render draws a snapshot as watchers prints it, one line per element.
// (Snapshot.String is a one-line summary: the tree is WriteTo's.)
func render(s *watchers.Snapshot) []string {
	var b strings.Builder
	s.WriteTo(&b) // a strings.Builder does not fail
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

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
		changes := diff(p.prev, lines)
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

// diff returns the lines of b not in a ("+ "), those of a not in b ("- "),
// each preceded by its ancestors in the tree ("  "), from a longest common
// subsequence of the lines.
func diff(a, b []string) []string {
	type op struct {
		kind byte // ' ', '-', '+'
		text string
	}
	// lcs[i][j] is the length of the LCS of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []op
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, op{' ', a[i]})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			// Removals first, as in a unified diff.
			ops = append(ops, op{'-', a[i]})
			i++
		default:
			ops = append(ops, op{'+', b[j]})
			j++
		}
	}
	// Mark the ancestors of each changed line: the nearest lines above it,
	// on its side of the diff, with less indentation.
	context := make([]bool, len(ops))
	for k, o := range ops {
		if o.kind == ' ' {
			continue
		}
		level := depthOf(o.text)
		for m := k - 1; m >= 0 && level > 0; m-- {
			other := ops[m].kind
			if other != ' ' && other != o.kind {
				continue
			}
			if d := depthOf(ops[m].text); d < level {
				level = d
				if other == ' ' {
					context[m] = true
				}
			}
		}
	}
	var out []string
	for k, o := range ops {
		if o.kind != ' ' || context[k] {
			out = append(out, string(o.kind)+" "+o.text)
		}
	}
	return out
}

func depthOf(line string) int {
	n := 0
	for strings.HasPrefix(line[n*len(indent):], indent) {
		n++
	}
	return n
}
