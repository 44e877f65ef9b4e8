package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
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

// The small matrix runs end to end, both clients, both protocols, both
// cache modes, channels to reachable, unreachable and refused backends, and
// goxds's channel connecting on first RPC, so that
// the harness cannot rot: every cell reaches full config (run fails if
// goxds does not; grpc-go's row must not be a lower bound), updates are
// ACKed (run fails otherwise), nothing is NACKed, delta reconnects without
// resending, channels connect every endpoint and apply every round, and
// the table has its ratio rows.
func TestQuickMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("starts client processes")
	}
	// The deadline bounds a hang, not speed: the 18 runs take about a
	// minute on a quiet machine, and ran past two minutes with -race
	// beside the rest of the suite on 2 cores loaded 20-30 deep.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	rep, err := runMatrix(ctx, []string{"-quick", "-wide", "-timeout", "30s", "-ack-timeout", "10s"}, &out, &log)
	if err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, log.String())
	}
	table := out.String()
	t.Logf("\n%s", table)
	for _, want := range []string{"goxds/grpc-go", "goxds/bare", "reconnect: 0 of 202 resources sent again"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	if strings.Contains(table, "no full config within") {
		t.Errorf("grpc-go did not reach full config in the quick matrix")
	}
	// A client row ends with 14 columns, the client's name first ("goxds",
	// or "grpc-go (SotW)" and "bare (reference)" whose second word counts)
	// and the NACKs ninth.
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 14 {
			continue
		}
		cols := f[len(f)-14:]
		if cols[0] != "goxds" && cols[0] != "(SotW)" && cols[0] != "(reference)" {
			continue
		}
		rows++
		if cols[8] != "0" {
			t.Errorf("%s NACKs in %q", cols[8], line)
		}
	}
	if rows != 20 { // eight cells, a goxds and a grpc-go row each; the four without a channel a bare row too
		t.Errorf("found %d client rows in the table, want 20", rows)
	}
	checkModes(t, rep)
	// Progress, one line per client run (the log is not a terminal), each
	// saying where in the matrix it is.
	var progress []string
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.HasPrefix(line, "run ") && strings.Contains(line, " of the matrix · ") {
			progress = append(progress, line)
		}
	}
	// grpc-go once for each world size, cache mode and channel mode (6:
	// its channel connects the same way in the first-RPC cell, whose
	// baseline is the reachable cell's), goxds once per cell (8), bare
	// once per cell without a channel (4); each run says when it ends how
	// long it took.
	if len(progress) != 18 || !strings.HasPrefix(progress[17], "run 18/18 of the matrix") {
		t.Errorf("progress lines %q, want runs 1/18 to 18/18", progress)
	}
	if took := strings.Count(log.String(), "\n  took "); took != 18 {
		t.Errorf("%d runs said how long they took, want 18", took)
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

// checkModes checks the report of the quick matrix cell by cell: each mode
// has the rows it should, and a channel cell measured what it says.
func checkModes(t *testing.T, rep *report) {
	t.Helper()
	modes := map[string]int{}
	for _, l := range rep.lines {
		mode := l.c.cache + "/" + l.c.channel
		if l.c.firstRPC {
			mode += "/first-rpc"
		}
		modes[mode]++
		rows := []*result{l.baseline, l.mine}
		switch {
		case l.c.channel == "":
			// The bare client runs beside goxds where there is no channel.
			rows = append(rows, l.bare)
		case l.bare != nil:
			t.Errorf("%s: the bare client ran in a channel cell", l.c)
		}
		for _, x := range rows {
			if x == nil {
				t.Errorf("%s: a client row is missing", l.c)
				continue
			}
			if x.cache != l.c.cache || x.channel != l.c.channel {
				t.Errorf("%s: %s ran with cache %q, channel %q", l.c, x.impl, x.cache, x.channel)
			}
			if x.incomplete || x.nacks != 0 {
				t.Errorf("%s: %s incomplete %v, %d NACKs", l.c, x.impl, x.incomplete, x.nacks)
			}
			if l.c.channel == "" {
				continue
			}
			if l.c.channel == backendsRefused {
				// Nothing to connect to, nothing seen at the backends:
				// only the ACKs and the CPU are measured.
				if x.wantHosts != 0 || x.applied != 0 || x.rounds != 5 || x.acked != 5 || x.cpuMed <= 0 || x.probe != "-" {
					t.Errorf("%s: %s endpoints %d, rounds %d, ACKed %d, applied %d, CPU per round %v, probe %q; want 5 rounds ACKed, nothing applied, no probe",
						l.c, x.impl, x.wantHosts, x.rounds, x.acked, x.applied, x.cpuMed, x.probe)
				}
				continue
			}
			// Every endpoint connected (on first RPC: those of the
			// clusters called), every round ACKed and applied (a
			// connection to one of the cluster's new endpoints).
			wantHosts := channelClusters(x.impl, l.c, 5) * l.c.m
			if x.wantHosts != wantHosts || x.connectedHosts != x.wantHosts || x.connected <= 0 {
				t.Errorf("%s: %s connected %d of %d endpoints (want %d) in %v", l.c, x.impl, x.connectedHosts, x.wantHosts, wantHosts, x.connected)
			}
			if x.rounds != 5 || x.acked != 5 || x.applied != 5 || x.applyMed <= 0 || x.applyMax < x.applyMed || x.cpuMed <= 0 {
				t.Errorf("%s: %s rounds %d, ACKed %d, applied %d, push→applied median %v max %v, CPU per round %v; want 5 rounds, all ACKed and applied",
					l.c, x.impl, x.rounds, x.acked, x.applied, x.applyMed, x.applyMax, x.cpuMed)
			}
			want := "ok" // RPCs served by the cluster's endpoints
			if l.c.channel == backendsUnreachable {
				want = "-"
			}
			if x.probe != want {
				t.Errorf("%s: %s probe %q, want %q", l.c, x.impl, x.probe, want)
			}
		}
	}
	for mode, cells := range map[string]int{cacheNonADS + "/": 3, cacheADS + "/": 1, cacheNonADS + "/" + backendsReachable: 1, cacheNonADS + "/" + backendsUnreachable: 1, cacheNonADS + "/" + backendsRefused: 1,
		cacheNonADS + "/" + backendsReachable + "/first-rpc": 1} {
		if modes[mode] != cells {
			t.Errorf("%d cells of mode %s, want %d", modes[mode], mode, cells)
		}
	}
}

// Every endpoint of a world, at every round, has an address of its own in
// 127.0.0.0/8, never the management server's 127.0.0.1: the backends tell
// endpoints apart by the address a connection arrives at.
func TestEndpointHostsDistinct(t *testing.T) {
	const n, m, rounds = 1000, 3, 50
	seen := map[string]string{"127.0.0.1": "the management server"}
	for round := 0; round <= rounds; round++ {
		for i := range n {
			if round > 0 && i != roundCluster(n, round) { // the rounds change one cluster each
				continue
			}
			for p, h := range hostsOf(n, i, m, round) {
				who := fmt.Sprintf("cluster %d endpoint %d round %d", i, p, round)
				ip := net.ParseIP(h)
				if ip == nil || !ip.IsLoopback() || ip.To4() == nil || ip.To4()[3] == 0 || ip.To4()[3] == 255 {
					t.Fatalf("%s: %q is not a usable 127.0.0.0/8 address", who, h)
				}
				if other, dup := seen[h]; dup {
					t.Fatalf("%s: %s is also %s", who, h, other)
				}
				seen[h] = who
			}
		}
	}
}

func TestHealthyFor(t *testing.T) {
	for _, c := range []struct {
		n, m  int
		limit uint64
		want  int
	}{
		{100, 3, 20000, 3},       // fits
		{10000, 3, 20000, 1},     // 30,000 do not; 10,000 do
		{1000, 100, 20000, 17},   // (20000-2048)/1000
		{100000, 3, 20000, 0},    // not even one per cluster
		{10000, 3, 0, 3},         // limit unknown: all
		{10, 3, filesSpare, 0},   // nothing left over
		{10000, 3, 1 << 20, 3},   // raised
		{10000, 3, 12048, 1},     // exactly one each
		{10000, 3, 12047, 0},     // one short
		{10000, 3, 22048, 2},     // two each
		{10000, 3, 1<<20 - 1, 3}, // plenty
	} {
		if got := healthyFor(c.n, c.m, c.limit); got != c.want {
			t.Errorf("healthyFor(%d, %d, %d) = %d, want %d", c.n, c.m, c.limit, got, c.want)
		}
	}
}

// TestTimeline: the server's view of each type's first exchange, in the
// order of the tree, with the client's gap between ACKing a type and
// subscribing to the next; what comes after full config is left out.
func TestTimeline(t *testing.T) {
	tr := newTracker(1)
	tr.streamOpened(true)
	resp := func(typeURL, nonce string, names ...string) {
		r := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: typeURL, Nonce: nonce}
		for _, n := range names {
			r.Resources = append(r.Resources, &discoveryv3.Resource{Name: n})
		}
		tr.deltaResponse(r)
	}
	tr.request(ldsURL, 1, "", "", false)
	resp(ldsURL, "1", "l")
	tr.request(ldsURL, 0, "1", "", false)
	tr.request(rdsURL, 1, "", "", false)
	resp(rdsURL, "2", "r")
	tr.request(rdsURL, 0, "2", "", false)
	tr.request(cdsURL, 1, "", "", false)
	resp(cdsURL, "3", "c")
	tr.request(cdsURL, 0, "3", "", true) // a NACK is no ACK
	tr.request(edsURL, 1, "", "", false)
	resp(edsURL, "4", "e")
	tr.request(edsURL, 0, "4", "", false) // full config
	tr.request(cdsURL, 0, "3", "", false) // after it: not recorded
	got := tr.timeline()
	want := regexp.MustCompile(`: Listener \d+ → \d+ → \d+; RouteConfiguration \d+ \[\+\d+\] → \d+ → \d+; ` +
		`Cluster \d+ \[\+\d+\] → \d+ → -; ClusterLoadAssignment \d+ → \d+ → \d+$`)
	if !want.MatchString(got) {
		t.Errorf("timeline %q, want it to match %s", got, want)
	}
}
