package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// median returns, field by field, the median of the runs (the lower middle
// for an even count). The request counts by type come from the run with
// the median time to full config.
func median(rs []result) result {
	out := rs[0]
	mid := func(get func(r *result) int64) int64 {
		vs := make([]int64, len(rs))
		for i := range rs {
			vs[i] = get(&rs[i])
		}
		slices.Sort(vs)
		return vs[(len(vs)-1)/2]
	}
	dur := func(get func(r *result) time.Duration) time.Duration {
		return time.Duration(mid(func(r *result) int64 { return int64(get(r)) }))
	}
	out.ttfc = dur(func(r *result) time.Duration { return r.ttfc })
	out.cpu = dur(func(r *result) time.Duration { return r.cpu })
	out.settledCPU = dur(func(r *result) time.Duration { return r.settledCPU })
	for i := range rs {
		out.capped = out.capped || rs[i].capped
		out.incomplete = out.incomplete || rs[i].incomplete
	}
	out.updP50 = dur(func(r *result) time.Duration { return r.updP50 })
	out.updP99 = dur(func(r *result) time.Duration { return r.updP99 })
	out.pushP50 = dur(func(r *result) time.Duration { return r.pushP50 })
	out.pushP99 = dur(func(r *result) time.Duration { return r.pushP99 })
	out.updCPU = dur(func(r *result) time.Duration { return r.updCPU })
	out.resendCPU = dur(func(r *result) time.Duration { return r.resendCPU })
	out.totalCPU = dur(func(r *result) time.Duration { return r.totalCPU })
	out.reqs = mid(func(r *result) int64 { return r.reqs })
	out.names = mid(func(r *result) int64 { return r.names })
	out.bytesIn = mid(func(r *result) int64 { return r.bytesIn })
	out.bytesOut = mid(func(r *result) int64 { return r.bytesOut })
	out.nacks = mid(func(r *result) int64 { return r.nacks })
	out.rss = mid(func(r *result) int64 { return r.rss })
	out.settledRSS = mid(func(r *result) int64 { return r.settledRSS })
	out.totalRSS = mid(func(r *result) int64 { return r.totalRSS })
	out.resent = int(mid(func(r *result) int64 { return int64(r.resent) }))
	out.connected = dur(func(r *result) time.Duration { return r.connected })
	out.idle = dur(func(r *result) time.Duration { return r.idle })
	out.ackMed = dur(func(r *result) time.Duration { return r.ackMed })
	out.ackMax = dur(func(r *result) time.Duration { return r.ackMax })
	out.applyMed = dur(func(r *result) time.Duration { return r.applyMed })
	out.applyMax = dur(func(r *result) time.Duration { return r.applyMax })
	out.cpuMed = dur(func(r *result) time.Duration { return r.cpuMed })
	out.cpuMax = dur(func(r *result) time.Duration { return r.cpuMax })
	// Counts and the probe: the worst run's, so that a lapse in one run
	// shows.
	for i := range rs {
		x := &rs[i]
		if x.connectedHosts < out.connectedHosts {
			out.connectedHosts = x.connectedHosts
		}
		if x.acked < out.acked || x.applied < out.applied {
			out.rounds, out.acked, out.applied = x.rounds, x.acked, x.applied
		}
		if x.probe != "ok" && x.probe != "" {
			out.probe = x.probe
		}
	}
	for i := range rs {
		if rs[i].ttfc == out.ttfc {
			out.reqsByType = rs[i].reqsByType
		}
	}
	out.info = rs[len(rs)-1].info
	out.runs = len(rs)
	return out
}

type reportLine struct {
	c        cell
	mine     *result
	bare     *result // the decode-and-ACK reference, nil when not run
	baseline *result
	floor    floors
}

type report struct {
	cfg   *config
	lines []reportLine
	load  []string // /proc/loadavg, at the start and after each cell
}

func newReport(cfg *config) *report {
	return &report{cfg: cfg, load: []string{loadavg()}}
}

func (r *report) add(c cell, mine, bare, baseline *result, f floors) {
	r.lines = append(r.lines, reportLine{c: c, mine: mine, bare: bare, baseline: baseline, floor: f})
	r.load = append(r.load, loadavg())
}

// print prints the report: in compactWidth columns (printCompact), or
// with -wide every figure, the full legend and each client's notes.
func (r *report) print(w io.Writer) {
	if !r.cfg.wide {
		r.printCompact(w)
		return
	}
	r.printWide(w)
}

func (r *report) printWide(w io.Writer) {
	fmt.Fprintf(w, "goxds load test, %s\n", r.cfg.startedAt.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "machine: %d cores (%s), %s %s/%s\n", runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "load average (1/5/15 min): at start %s; at the end %s; highest 1-min during the run %s\n",
		r.load[0], r.load[len(r.load)-1], highestLoad(r.load))
	fmt.Fprintf(w, "each cell: median of %d runs (grpc-go once from N=%d); %d update rounds, %d CDS resends per run; took %v\n\n",
		r.cfg.repeat, r.cfg.grpcOnce, r.cfg.run.rounds, r.cfg.run.resends, time.Since(r.cfg.startedAt).Round(time.Second))

	fmt.Fprint(w, `columns: full config = stream open → ACK of the last EDS resource, at the server; ×floor = over the
  decode floor below; CPU and peak RSS = the client process's when the server saw full config (CPU
  counted from the client's creation); requests, names, req bytes = what the client sent until full
  config; upd p50/p99 = one cluster's endpoints change → ACK of the response carrying them;
  push→ACK = from that response leaving the server; upd CPU = client CPU per update, ×floor = over
  the floor of the update's response (SotW: all N ClusterLoadAssignments; delta: one). grpc-go speaks
  SotW only: its row is the baseline of both protocols' cells. bare (reference) = a client that only
  decodes and ACKs (what the server and protobuf allow), run in turns with goxds. ">": the baseline
  did not reach full config within -timeout, and its figures are what it had reached by then (lower
  bounds); "<": a ratio against such figures (an upper bound).

`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cell\tclient\tfull config\t×floor\tCPU\tpeak RSS\trequests\tnames\treq bytes\tNACKs\tupd p50\tupd p99\tpush→ACK p50\tupd CPU\t×floor\t")
	for _, l := range r.lines {
		name := l.c.String()
		updFloor := l.floor.eds
		if l.c.protocol == protoDelta {
			updFloor = l.floor.one
		}
		row := func(label, client string, x *result) {
			// An incomplete result's figures are lower bounds.
			lb := ""
			if x.incomplete {
				lb = ">"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n",
				label, client, lb+fmtDur(x.ttfc), lb+fmtRatio(x.ttfc, l.floor.full), lb+fmtDur(x.cpu), lb+fmtBytes(x.rss),
				lb+fmtCount(x.reqs), lb+fmtCount(x.names), lb+fmtBytes(x.bytesIn), x.nacks,
				fmtDur(x.updP50), fmtDur(x.updP99), fmtDur(x.pushP50), fmtDur(x.updCPU), fmtRatio(x.updCPU, updFloor))
		}
		label := name
		if b := l.baseline; b != nil {
			row(label, "grpc-go (SotW)", b)
			label = ""
		}
		if x := l.bare; x != nil {
			row(label, "bare (reference)", x)
			label = ""
		}
		if x := l.mine; x != nil {
			row(label, x.impl, x)
			label = ""
			if b := l.bare; b != nil {
				fmt.Fprintf(tw, "\tgoxds/bare\t%s\t\t%s\t%s\t\t\t\t\t%s\t%s\t%s\t%s\t\t\n",
					ratio(x.ttfc, b.ttfc), ratio(x.cpu, b.cpu), ratio(x.rss, b.rss),
					ratio(x.updP50, b.updP50), ratio(x.updP99, b.updP99), ratio(x.pushP50, b.pushP50), ratio(x.updCPU, b.updCPU))
			}
			if b := l.baseline; b != nil {
				// Against a baseline's lower bounds, a ratio is an upper
				// bound.
				ub := ""
				if b.incomplete {
					ub = "<"
				}
				fmt.Fprintf(tw, "\tgoxds/grpc-go\t%s\t\t%s\t%s\t%s\t%s\t%s\t\t%s\t%s\t%s\t%s\t\t\n",
					ub+ratio(x.ttfc, b.ttfc), ub+ratio(x.cpu, b.cpu), ub+ratio(x.rss, b.rss),
					ub+ratio(x.reqs, b.reqs), ub+ratio(x.names, b.names), ub+ratio(x.bytesIn, b.bytesIn),
					ratio(x.updP50, b.updP50), ratio(x.updP99, b.updP99), ratio(x.pushP50, b.pushP50), ratio(x.updCPU, b.updCPU))
			}
		}
	}
	tw.Flush()

	r.printChannels(w)

	fmt.Fprintln(w, "\ndecode floor (proto.Unmarshal, every Any unpacked) and further measurements:")
	for _, l := range r.lines {
		fmt.Fprintf(w, "  %s: floor %s for the whole tree, %s for the SotW EDS response, %s for the CDS response, %s for a delta response of one ClusterLoadAssignment\n",
			l.c, fmtDur(l.floor.full), fmtDur(l.floor.eds), fmtDur(l.floor.cds), fmtDur(l.floor.one))
		for _, x := range []*result{l.baseline, l.bare, l.mine} {
			if x == nil {
				continue
			}
			client := x.impl
			var notes []string
			notes = append(notes, "requests by type "+byType(x.reqsByType), settledText(x, r.cfg.run.settle))
			if x.resendCPU > 0 {
				notes = append(notes, fmt.Sprintf("unchanged CDS resend %s CPU (%s of its floor)", fmtDur(x.resendCPU), fmtRatio(x.resendCPU, l.floor.cds)))
			}
			if x.resent >= 0 {
				notes = append(notes, fmt.Sprintf("reconnect: %d of %d resources sent again", x.resent, x.resentOf))
			}
			if x.pushP99 > 0 {
				notes = append(notes, "push→ACK p99 "+fmtDur(x.pushP99))
			}
			notes = append(notes, "whole run: CPU "+fmtDur(x.totalCPU)+", peak RSS "+fmtBytes(x.totalRSS), x.info)
			fmt.Fprintf(w, "    %s (%s): %s\n", client, x.protocol, strings.Join(notes, "; "))
		}
	}
}

// settledText says what the client used until it went idle after full
// config, or that it did not within the settle limit.
func settledText(x *result, limit time.Duration) string {
	if x.incomplete {
		return fmt.Sprintf("no full config within %v: its figures are what it had reached by then, lower bounds; updates not measured", x.ttfc)
	}
	if x.capped {
		what := "updates not measured"
		if x.channel != "" {
			what = "the channel's rounds measured all the same"
		}
		return fmt.Sprintf("still busy %v after full config (CPU ≥%s, peak RSS ≥%s): %s",
			limit, fmtDur(x.settledCPU), fmtBytes(x.settledRSS), what)
	}
	return fmt.Sprintf("once idle after full config: CPU %s, peak RSS %s", fmtDur(x.settledCPU), fmtBytes(x.settledRSS))
}

func byType(m map[string]int64) string {
	var parts []string
	for _, u := range typeURLs {
		short := u[strings.LastIndex(u, ".")+1:]
		parts = append(parts, fmt.Sprintf("%s %d", short, m[u]))
	}
	return strings.Join(parts, ", ")
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 100*time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%.0fs", d.Seconds())
}

func fmtBytes(b int64) string {
	switch {
	case b >= 10<<30:
		return fmt.Sprintf("%.0fGiB", float64(b)/(1<<30))
	case b >= 1<<30:
		return fmt.Sprintf("%.2fGiB", float64(b)/(1<<30))
	case b >= 10<<20:
		return fmt.Sprintf("%.0fMiB", float64(b)/(1<<20))
	case b >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0fKiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%dB", b)
}

func fmtCount(n int64) string {
	switch {
	case n >= 10_000_000:
		return fmt.Sprintf("%.0fM", float64(n)/1e6)
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// fmtRatio is a multiple: how many times b fits in a.
func fmtRatio[T ~int64](a, b T) string {
	if a == 0 || b == 0 {
		return "-"
	}
	x := float64(a) / float64(b)
	if x >= 10 {
		return fmt.Sprintf("%.0f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}

// ratio is a/b, as "1/k" when below 1.
func ratio[T ~int64](a, b T) string {
	if a == 0 || b == 0 {
		return "-"
	}
	x := float64(a) / float64(b)
	if x < 0.95 {
		k := 1 / x
		if k >= 10 {
			return fmt.Sprintf("1/%.0f", k)
		}
		return fmt.Sprintf("1/%.1f", k)
	}
	return fmt.Sprintf("%.2f×", x)
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func highestLoad(loads []string) string {
	best, bestV := "?", -1.0
	for _, l := range loads {
		var v float64
		if _, err := fmt.Sscan(l, &v); err == nil && v > bestV {
			best, bestV = strings.Fields(l)[0], v
		}
	}
	return best
}

// printChannels prints the table of the channel cells, if any.
func (r *report) printChannels(w io.Writer) {
	var lines []reportLine
	for _, l := range r.lines {
		if l.c.channel != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprint(w, `
gRPC channels: healthy = endpoints per cluster a channel connects to (the others are UNHEALTHY in EDS: a
  socket each in the client and the backends for every endpoint would exceed the open-file limit);
  connected = stream open → the first connection to the last endpoint of the world, at the
  backends; idle = full config → the client's last CPU use; rounds ACKed/made, applied = rounds whose
  push was followed by a connection to one of the cluster's new endpoints; push→ACK and push→applied
  (the first connection to a new endpoint), median and max over the rounds; CPU per round = from the
  round's start until the client is idle again, median and max; probe = an RPC to the route of the
  first and last cluster, and after the rounds to the one last changed, served by its endpoints
  (reachable backends only).

`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cell\tclient\thealthy\tfull config\tconnected\tidle\tCPU\tpeak RSS\tACKed\tapplied\tpush→ACK med\tmax\tpush→applied med\tmax\tCPU/round med\tmax\tprobe\t")
	for _, l := range lines {
		label := l.c.String()
		for _, x := range []*result{l.baseline, l.mine} {
			if x == nil {
				continue
			}
			client := x.impl
			if x.impl == implGRPC {
				client = "grpc-go (SotW)"
			}
			lb := ""
			if x.incomplete {
				lb = ">"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
				label, client, x.healthy, x.m, lb+fmtDur(x.ttfc), fmtConnected(x), fmtDur(x.idle), lb+fmtDur(x.settledCPU), lb+fmtBytes(x.totalRSS),
				x.acked, x.rounds, x.applied, fmtDur(x.ackMed), fmtDur(x.ackMax), fmtDur(x.applyMed), fmtDur(x.applyMax),
				fmtDur(x.cpuMed), fmtDur(x.cpuMax), x.probe)
			label = ""
		}
	}
	tw.Flush()
}

// fmtConnected is the time to connect every endpoint, or how many were.
func fmtConnected(x *result) string {
	if x.wantHosts > 0 && x.connectedHosts < x.wantHosts {
		return fmt.Sprintf("%d/%d", x.connectedHosts, x.wantHosts)
	}
	return fmtDur(x.connected)
}
