package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the client process too: the
// harness starts os.Executable() with childCommand, which here is this
// binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childCommand {
		os.Exit(childMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// The small matrix runs end to end, both clients, both protocols, so that
// the harness cannot rot: every cell reaches full config (run fails if
// goxds does not; grpc-go's row must not be a lower bound), updates are
// ACKed (run fails otherwise), nothing is NACKed, delta reconnects without
// resending, and the table has its ratio rows.
func TestQuickMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("starts client processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	if err := run(ctx, []string{"-quick", "-timeout", "30s"}, &out, &log); err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, log.String())
	}
	table := out.String()
	t.Logf("\n%s", table)
	for _, want := range []string{"goxds/grpc-go", "reconnect: 0 of 202 resources sent again"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	if strings.Contains(table, "no full config within") {
		t.Errorf("grpc-go did not reach full config in the quick matrix")
	}
	// A client row ends with 14 columns, the client's name first ("goxds",
	// or "grpc-go (SotW)" whose second word counts) and the NACKs ninth.
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 14 {
			continue
		}
		cols := f[len(f)-14:]
		if cols[0] != "goxds" && cols[0] != "(SotW)" {
			continue
		}
		rows++
		if cols[8] != "0" {
			t.Errorf("%s NACKs in %q", cols[8], line)
		}
	}
	if rows != 6 { // three cells, a goxds and a grpc-go row each
		t.Errorf("found %d client rows in the table, want 6", rows)
	}
	// Progress, one line per client run (the log is not a terminal), each
	// saying where in the matrix it is.
	var progress []string
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.HasPrefix(line, "run ") && strings.Contains(line, " of the matrix · ") {
			progress = append(progress, line)
		}
	}
	if len(progress) != 5 || !strings.HasPrefix(progress[4], "run 5/5 of the matrix") {
		t.Errorf("progress lines %q, want runs 1/5 to 5/5 (grpc-go for two world sizes, goxds for three cells)", progress)
	}
	// goxds subscribes to the 100 clusters in one request per type, and
	// grpc-go one name at a time: the request counts tell them apart.
	if !strings.Contains(table, "goxds (sotw): requests by type Listener 2, RouteConfiguration 2, Cluster 2, ClusterLoadAssignment 2") {
		t.Errorf("goxds did not resolve with 2 requests per type (a subscription and an ACK)")
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	for p, want := range map[int]time.Duration{50: 50, 99: 99, 100: 100} {
		if got := percentile(ds, p); got != want {
			t.Errorf("p%d = %v, want %v", p, got, want)
		}
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("p99 of one = %v, want 7", got)
	}
}

func TestRatios(t *testing.T) {
	for _, c := range []struct {
		a, b int64
		want string
	}{{1, 127, "1/127"}, {1, 2, "1/2.0"}, {3, 2, "1.50×"}, {0, 5, "-"}} {
		if got := ratio(c.a, c.b); got != c.want {
			t.Errorf("ratio(%d, %d) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
