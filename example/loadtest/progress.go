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
	baseline := make(map[baselineKey]bool)
	for _, c := range cfg.cells {
		key := baselineOf(c)
		if cfg.impls[implGRPC] && !baseline[key] && c.n <= cfg.grpcMaxN {
			baseline[key] = true
			if c.n >= cfg.grpcOnce {
				total++
			} else {
				total += cfg.repeat
			}
		}
		total += len(cellImpls(cfg, c)) * cfg.repeat
	}
	return total
}

// run reports that a client run starts, and returns when.
func (p *progress) run(impl string, c cell, i, times int) time.Time {
	p.done++
	now := time.Now()
	elapsed := now.Sub(p.start).Round(time.Second)
	what := fmt.Sprintf("run %d/%d of the matrix · %s · %s %s (%d/%d)", p.done, p.total, elapsed, impl, c, i+1, times)
	if !p.bar {
		fmt.Fprintln(p.w, what)
		return now
	}
	const width = 20
	filled := width * (p.done - 1) / max(p.total, 1)
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), what)
	return now
}

// ran reports how long the run that started at started took, and its
// headline figures. On a terminal the line replaces the bar, which the
// next run draws again below it.
func (p *progress) ran(started time.Time, r *result) {
	line := fmt.Sprintf("  took %s: full config %s, CPU %s, peak RSS %s", fmtDur(time.Since(started)), fmtDur(r.ttfc), fmtDur(r.cpu), fmtBytes(r.rss))
	if r.incomplete {
		line = fmt.Sprintf("  took %s: no full config within %s", fmtDur(time.Since(started)), fmtDur(r.ttfc))
	}
	if r.channel != "" {
		line += fmt.Sprintf("; endpoints connected %d/%d", r.connectedHosts, r.wantHosts)
		if r.rounds > 0 {
			line += fmt.Sprintf(", rounds ACKed %d/%d, applied %d", r.acked, r.rounds, r.applied)
		}
	}
	if p.bar {
		line = fmt.Sprintf("\r\033[K%s %s%s", r.impl, cell{protocol: r.protocol, n: r.n, m: r.m, cache: r.cache, channel: r.channel}, line[1:])
	}
	fmt.Fprintln(p.w, line)
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
