package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// bigReport is a report with the widest figures a run gives: the largest
// world, a baseline that did not reach full config, minutes of CPU,
// gigabytes, millions of requests, a channel cell with the longest name,
// endpoints left UNHEALTHY and a failed probe.
func bigReport(wide bool) *report {
	cfg := &config{repeat: 3, startedAt: time.Now().Add(-42 * time.Minute), wide: wide,
		run: runOptions{rounds: 50, resends: 5, settle: 30 * time.Second}}
	r := newReport(cfg)
	res := func(impl string, incomplete bool) *result {
		return &result{impl: impl, protocol: protoSotW, ttfc: 312 * time.Second, cpu: 754 * time.Second, rss: 3 << 30,
			reqs: 12_345_678, names: 99_000_000, bytesIn: 5 << 30, incomplete: incomplete,
			updP50: 1500 * time.Millisecond, updP99: 12 * time.Second, pushP50: time.Second, updCPU: 987 * time.Millisecond,
			resent: -1, chanResult: chanResult{healthy: 20, wantHosts: 100, connectedHosts: 99, probe: "ok", rounds: 50, acked: 50, applied: 49,
				applyMed: 1234 * time.Millisecond}, settledCPU: 754 * time.Second, totalRSS: 3 << 30}
	}
	f := floors{full: time.Second, eds: time.Second, cds: time.Second, one: time.Millisecond}
	r.add(cell{protocol: protoDelta, n: 100000, m: 3, cache: cacheNonADS}, res(implGoxds, false), res(implBare, false), res(implGRPC, true), f)
	failed := res(implGoxds, false)
	failed.probe = "rpc to cluster-99999 served by 127.1.2.3:443, want one of its new endpoints"
	r.add(cell{protocol: protoDelta, n: 100000, m: 100, cache: cacheNonADS, channel: backendsUnreachable, firstRPC: true}, failed, nil, res(implGRPC, false), f)
	for _, x := range []*result{failed, r.lines[1].baseline} {
		x.m = 100
	}
	return r
}

// TestCompactReportFits holds the default report to an 80-column terminal
// with a two-line legend per table; before -wide existed the one report
// was about 350 columns wide and its legend ten lines.
func TestCompactReportFits(t *testing.T) {
	var out bytes.Buffer
	bigReport(false).print(&out)
	text := out.String()
	t.Logf("\n%s", text)
	for _, line := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(line); n > compactWidth {
			t.Errorf("%d columns: %q", n, line)
		}
	}
	// A legend is the block of lines between a blank line and the blank
	// line before its table's header.
	blocks := strings.Split(text, "\n\n")
	var legends int
	for i, b := range blocks {
		if i+1 < len(blocks) && strings.HasPrefix(blocks[i+1], "  client ") {
			legends++
			if n := strings.Count(b, "\n") + 1; n != 2 {
				t.Errorf("legend of %d lines, want 2:\n%s", n, b)
			}
		}
	}
	if legends != 2 {
		t.Errorf("found %d legends, want 2 (xDS clients and channels)", legends)
	}
	for _, want := range []string{
		// Against a baseline's lower bounds, a ratio is an upper bound.
		"\n  goxds/grpc-go       <1.00×  <1.00×    <1.00×  <1.00×    1.00×    1.00×\n",
		"\n  grpc-go              >312s   >754s  >3.00GiB    >12M    1.50s    987ms\n",
		"\ndelta N=100000 M=100 channel/unreachable connect=first-rpc cache=non-ads,\n    healthy 20/100 per cluster\n",
		"\n  goxds           312s     99/100  754s  3.00GiB  50/50    1.23s  FAILED\n",
		"\nprobe failed: delta N=100000 M=100 channel/unreachable connect=first-rpc\n    cache=non-ads, goxds: rpc to cluster-99999",
		"-wide: all figures",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// TestWideReportHasEveryColumn holds that -wide prints the full table and
// notes, which the compact one leaves out.
func TestWideReportHasEveryColumn(t *testing.T) {
	var out bytes.Buffer
	bigReport(true).print(&out)
	for _, want := range []string{"push→ACK p50", "req bytes", "NACKs", "decode floor (proto.Unmarshal", "push→applied med", "CPU/round med"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the wide report lacks %q", want)
		}
	}
}
