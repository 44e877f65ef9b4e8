package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"
)

// compactWidth is the most columns a line of the default report takes, so
// that it fits an 80-column terminal. -wide prints every column instead
// (printWide), about 200 columns, with the full legend and notes.
const compactWidth = 80

// printCompact prints the report to fit compactWidth columns: the figures
// most runs are read for, each cell's name on a line of its own above its
// rows rather than in a column, and a two-line legend.
func (r *report) printCompact(w io.Writer) {
	fmt.Fprintf(w, "goxds load test, %s, took %v, median of %d %s per cell\n",
		r.cfg.startedAt.Format("2006-01-02 15:04 MST"), time.Since(r.cfg.startedAt).Round(time.Second),
		r.cfg.repeat, plural(r.cfg.repeat, "run"))
	fmt.Fprintf(w, "%d cores, %s %s/%s; load average %s → %s, highest %s\n",
		runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		firstField(r.load[0]), firstField(r.load[len(r.load)-1]), highestLoad(r.load))
	fmt.Fprint(w, `
full config: stream open → last EDS ACK; CPU, RSS, reqs: the client's by then
upd: endpoints change → ACK, CPU per update; >: lower bound; -wide: all figures
`)
	t := &textTable{header: []string{"client", "full config", "CPU", "RSS", "reqs", "upd p50", "upd CPU"}}
	for _, l := range r.lines {
		t.heading(l.c.String())
		row := func(client string, x *result) {
			lb := ""
			if x.incomplete {
				lb = ">"
			}
			t.row(client, lb+fmtDur(x.ttfc), lb+fmtDur(x.cpu), lb+fmtBytes(x.rss), lb+fmtCount(x.reqs),
				fmtDur(x.updP50), fmtDur(x.updCPU))
		}
		if b := l.baseline; b != nil {
			row(implGRPC, b)
		}
		if x := l.bare; x != nil {
			row(implBare, x)
		}
		x := l.mine
		if x == nil {
			continue
		}
		row(x.impl, x)
		if b := l.bare; b != nil {
			t.row("goxds/bare", ratio(x.ttfc, b.ttfc), ratio(x.cpu, b.cpu), ratio(x.rss, b.rss), "",
				ratio(x.updP50, b.updP50), ratio(x.updCPU, b.updCPU))
		}
		if b := l.baseline; b != nil {
			ub := "" // against a baseline's lower bounds, an upper bound
			if b.incomplete {
				ub = "<"
			}
			t.row("goxds/grpc-go", ub+ratio(x.ttfc, b.ttfc), ub+ratio(x.cpu, b.cpu), ub+ratio(x.rss, b.rss),
				ub+ratio(x.reqs, b.reqs), ratio(x.updP50, b.updP50), ratio(x.updCPU, b.updCPU))
		}
	}
	t.write(w)
	r.printChannelsCompact(w)
}

// printChannelsCompact is printChannels in compactWidth columns.
func (r *report) printChannelsCompact(w io.Writer) {
	t := &textTable{header: []string{"client", "full config", "connected", "CPU", "RSS", "ACKed", "applied", "probe"}}
	var failed []string
	for _, l := range r.lines {
		if l.c.channel == "" {
			continue
		}
		first := true
		for _, x := range []*result{l.baseline, l.mine} {
			if x == nil {
				continue
			}
			if first {
				// Endpoints past the open-file limit are UNHEALTHY: say so
				// when there were any.
				h := l.c.String()
				if x.healthy < x.m {
					h += fmt.Sprintf(", healthy %d/%d per cluster", x.healthy, x.m)
				}
				t.heading(h)
				first = false
			}
			lb := ""
			if x.incomplete {
				lb = ">"
			}
			probe := x.probe
			if probe != "ok" && probe != "-" && probe != "" {
				failed = append(failed, fmt.Sprintf("%s, %s: %s", l.c, x.impl, probe))
				probe = "FAILED"
			}
			t.row(x.impl, lb+fmtDur(x.ttfc), fmtConnected(x), lb+fmtDur(x.settledCPU), lb+fmtBytes(x.totalRSS),
				fmt.Sprintf("%d/%d", x.acked, x.rounds), fmtDur(x.applyMed), cmp.Or(probe, "-"))
		}
	}
	if len(t.rows) == 0 {
		return
	}
	fmt.Fprint(w, `
channels: connected = stream open → all endpoints connected; CPU, RSS once idle;
ACKed = update rounds ACKed; applied = push → a new endpoint connected (median)
`)
	t.write(w)
	for _, f := range failed {
		writeWrapped(w, "probe failed: "+f)
	}
}

// textTable lines up rows of cells in columns, two spaces apart, the first
// column left-aligned and the others right-aligned; a heading is a line of
// its own, not aligned, above the rows that follow it. Unlike tabwriter, it
// aligns the columns over every row, headings or not.
type textTable struct {
	header []string
	rows   [][]string // a heading is a row of one cell with headingMark
}

// headingMark starts the one cell of a heading row.
const headingMark = "\x00"

func (t *textTable) heading(s string) { t.rows = append(t.rows, []string{headingMark + s}) }

func (t *textTable) row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *textTable) write(w io.Writer) {
	widths := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		if len(r) == 1 && strings.HasPrefix(r[0], headingMark) {
			continue
		}
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	line := func(r []string) {
		var b strings.Builder
		b.WriteString("  ")
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(c + pad)
				continue
			}
			b.WriteString("  " + pad + c)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	fmt.Fprintln(w)
	line(t.header)
	for _, r := range t.rows {
		if len(r) == 1 && strings.HasPrefix(r[0], headingMark) {
			writeWrapped(w, strings.TrimPrefix(r[0], headingMark))
			continue
		}
		line(r)
	}
}

// writeWrapped writes s, broken at spaces into lines of at most
// compactWidth columns, the lines after the first indented.
func writeWrapped(w io.Writer, s string) {
	prefix := ""
	for utf8.RuneCountInString(prefix+s) > compactWidth {
		cut := -1
		for i, c := range s {
			if c == ' ' && utf8.RuneCountInString(prefix+s[:i]) <= compactWidth {
				cut = i
			}
		}
		if cut <= 0 {
			break // one word wider than the line: leave it whole
		}
		fmt.Fprintln(w, prefix+s[:cut])
		s, prefix = s[cut+1:], "    "
	}
	fmt.Fprintln(w, prefix+s)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return "?"
}
