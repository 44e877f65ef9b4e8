package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress tells the user, as the matrix runs, which run of which cell is
// under way and how long the whole has taken: the full matrix lasts about
// ten minutes, and a silent terminal for that long looks like a hang. On a
// terminal it redraws one line with a bar; elsewhere (a CI log, a pipe, or
// with -v, whose lines would break the bar) it writes a line per run.
type progress struct {
	w     io.Writer
	bar   bool
	start time.Time
	total int // client runs in the matrix
	done  int // client runs started before the current one
}

func newProgress(w io.Writer, cfg *config) *progress {
	return &progress{w: w, bar: isTerminal(w) && !cfg.verbose, start: cfg.startedAt, total: plannedRuns(cfg)}
}

// plannedRuns counts the client runs run will make, as run decides them.
func plannedRuns(cfg *config) int {
	total := 0
	baseline := make(map[[2]int]bool)
	for _, c := range cfg.cells {
		key := [2]int{c.n, c.m}
		if cfg.impls[implGRPC] && !baseline[key] && c.n <= cfg.grpcMaxN {
			baseline[key] = true
			if c.n >= cfg.grpcOnce {
				total++
			} else {
				total += cfg.repeat
			}
		}
		if cfg.impls[implGoxds] || cfg.impls[implBare] {
			total += cfg.repeat
		}
	}
	return total
}

// run reports that a client run starts.
func (p *progress) run(impl, protocol string, n, m, i, times int) {
	p.done++
	elapsed := time.Since(p.start).Round(time.Second)
	what := fmt.Sprintf("run %d/%d of the matrix · %s · %s %s N=%d M=%d (%d/%d)", p.done, p.total, elapsed, impl, protocol, n, m, i+1, times)
	if !p.bar {
		fmt.Fprintln(p.w, what)
		return
	}
	const width = 20
	filled := width * (p.done - 1) / max(p.total, 1)
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), what)
}

// finish ends the bar's line, so that the table starts on a line of its own.
func (p *progress) finish() {
	if p.bar {
		fmt.Fprintf(p.w, "\r\033[Kmatrix done in %s\n", time.Since(p.start).Round(time.Second))
	}
}

// isTerminal reports whether w is a character device, as a terminal is.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
