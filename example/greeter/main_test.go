package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var countLine = regexp.MustCompile(`^  (\S+) +\S+ +(\d+) RPCs`)

// The demo runs to the end, and each step shows what it says: the 80/20
// split, the route change, the failover and the failback.
func TestDemo(t *testing.T) {
	for _, args := range [][]string{{"-rpcs", "500"}, {"-rpcs", "100", "-delta"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out bytes.Buffer
			if err := run(context.Background(), args, &out); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			rpcs, _ := strconv.Atoi(args[1])
			counts := parse(t, out.String())
			if len(counts) != len(steps) {
				t.Fatalf("%d steps printed, want %d:\n%s", len(counts), len(steps), out.String())
			}
			east := func(c map[string]int) int { return c["east-1"] + c["east-2"] }
			for i, c := range counts {
				if total := east(c) + c["west-1"]; total != rpcs {
					t.Errorf("step %d counted %d RPCs, want %d", i+1, total, rpcs)
				}
			}
			// 80/20 by weighted random choice: 30% either way would be
			// more than 5 standard deviations off even at 100 RPCs.
			if w := float64(counts[0]["west-1"]) / float64(rpcs); w < 0.05 || w > 0.35 {
				t.Errorf("step 1: west-1 got %.0f%%, want about 20%%", 100*w)
			}
			// Then: none, all (failover), none (failback).
			for i, want := range map[int]int{1: 0, 2: rpcs, 3: 0} {
				if got := counts[i]["west-1"]; got != want {
					t.Errorf("step %d: west-1 served %d RPCs, want %d", i+1, got, want)
				}
			}
			t.Logf("\n%s", out.String())
		})
	}
}

// parse reads the per-backend counts of each step.
func parse(t *testing.T, out string) []map[string]int {
	t.Helper()
	var steps []map[string]int
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "step ") {
			steps = append(steps, make(map[string]int))
			continue
		}
		if m := countLine.FindStringSubmatch(line); m != nil && len(steps) > 0 {
			n, _ := strconv.Atoi(m[2])
			steps[len(steps)-1][m[1]] = n
		}
	}
	return steps
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-rpcs", "0"}, {"extra"}, {"-nope"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}
