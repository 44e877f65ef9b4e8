// Command loadtest measures goxds against grpc-go's own xDS client, both
// following the same tree served by the same go-control-plane management
// server:
//
//	go run ./example/loadtest            # the whole matrix (≈10 min on 2 cores)
//	go run ./example/loadtest -quick     # a small matrix, seconds
//	go run ./example/loadtest -n 10000 -protocol sotw -impl goxds -repeat 1
//	go run ./example/loadtest -n 10000 -channel reachable -impl goxds
//
// The report fits an 80-column terminal: per cell, each client's time to
// full config, CPU, peak RSS, requests, and the cost of an update, with
// goxds's ratios to the others. -wide prints every figure (about 200
// columns), the full legend, the decode floors and each client's notes.
//
// The server (in this process) serves one listener → one route
// configuration with N routes → N EDS clusters → N ClusterLoadAssignments
// of M endpoints. Each client runs in a process of its own (this binary,
// started again), so that its CPU time and peak RSS are its own:
//
//   - goxds: client.New + watchers.WatchConfigTree, over SotW or delta;
//   - bare: the calibration client of bare.go, which only decodes and ACKs,
//     run in turns with goxds (not in channel cells);
//   - grpc-go: grpc-go's xds resolver (import google.golang.org/grpc/xds),
//     built on its own with a ClientConn that only counts updates: the xDS
//     client and the resolver's dependency manager, no channel. SotW only.
//
// Both read their bootstrap from GRPC_XDS_BOOTSTRAP_CONFIG.
//
// With -channel, each client is a gRPC channel instead: goxds's
// (grpcxds.NewClient, target goxds:///loadtest) and grpc-go's own
// (grpc.NewClient, target xds:///loadtest), the same ClientConn with
// different resolvers and balancers. Every endpoint of the world has an
// address of its own in 127.0.0.0/8, and one listener on the wildcard
// address serves them all: "-channel reachable" a gRPC server (subchannels
// go READY; an RPC to a cluster's route says which endpoint served it),
// "-channel unreachable" a listener that accepts and never speaks
// (subchannels stay CONNECTING until gRPC's 20 s connect deadline, then
// TRANSIENT_FAILURE and retry), "-channel refused" nothing (connections
// refused at once: the channel's cost without the connections'). The
// backends see, the same way for both
// channels, when a channel first connects to each endpoint: when it has
// connected the whole world, and per update round (one cluster's endpoints
// replaced by new addresses) the time from the push to the ACK and to the
// first connection to a new endpoint (the channel applied the change), the
// median and max over the rounds, the client's CPU per round, and whether
// every round was ACKed. A socket per endpoint must fit the open-file limit
// in the client and in the harness: endpoints past what fits are UNHEALTHY
// in EDS, which gRPC does not connect, and the report says how many per
// cluster were healthy. With -first-rpc goxds's channel connects a
// cluster on its first RPC (grpcxds.Options.ConnectOnFirstRPC): the
// harness calls the first and last cluster and those the rounds change,
// and waits for their endpoints only, as a service calling a few of the
// clusters its routes name.
//
// -cache says how go-control-plane's snapshot cache answers SotW
// subscriptions: non-ads (the default, as always: partial subscriptions
// are answered) or ads (a response waits until the request names every
// resource of its type). Every row names its mode.
//
// Measured at the server, so that any client is measured the same way: time
// to full config (stream open → every EDS resource ACKed), the requests,
// names and bytes the client sent until then, NACKs, and the latency of an
// update (one cluster's endpoints change → the ACK of the response carrying
// it). Measured at the client: CPU time (getrusage) at full config and per
// update, and peak RSS (VmHWM, which the client reports). The decode floor
// is the time to proto-unmarshal the same responses, every Any unpacked to
// its typed message: the least any client must do. With -v each run also
// logs its timeline at the server: when each type was subscribed to,
// answered and ACKed, and how long after ACKing the type above it the
// client subscribed to it (how well it pipelines its subscriptions).
//
// See docs/PERFORMANCE.md for the last full run and what it found.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == childCommand {
		os.Exit(childMain(os.Args[2:]))
	}
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// Protocols.
const (
	protoSotW  = "sotw"
	protoDelta = "delta"
)

// Cache modes of the go-control-plane snapshot cache (-cache).
const (
	// cacheNonADS: cache.NewSnapshotCache(false, ...), which answers any
	// SotW subscription, a partial one too. What the harness has always
	// used, and what testutils.ManagementServer uses.
	cacheNonADS = "non-ads"
	// cacheADS: cache.NewSnapshotCache(true, ...), which holds back a SotW
	// response until the request names every resource of the type in the
	// snapshot: a client that subscribes one name at a time (grpc-go) hears
	// nothing until it has named them all.
	cacheADS = "ads"
)

// cell is one line of the matrix: a world size, a protocol, the server's
// cache mode and what the clients run: the xDS client alone (channel "")
// or a gRPC channel whose backends behave as channel says.
type cell struct {
	protocol string
	n, m     int
	cache    string
	channel  string
	// firstRPC: goxds's channel connects a cluster on its first RPC
	// (grpcxds.Options.ConnectOnFirstRPC), and the harness calls only the
	// clusters it measures (usedClusters); grpc-go's channel connects
	// every cluster all the same.
	firstRPC bool
}

func (c cell) String() string {
	s := fmt.Sprintf("%s N=%d M=%d", c.protocol, c.n, c.m)
	if c.channel != "" {
		s += " channel/" + c.channel
	}
	if c.firstRPC {
		s += " connect=first-rpc"
	}
	return s + " cache=" + c.cache
}

// fullMatrix is the matrix: N ∈ {1, 100, 1,000, 10,000} × M = 3 and
// N = 1,000 × M = 100, in SotW and delta, and delta at N = 100,000, with
// the clients of channel and the server's cache in mode cache.
func fullMatrix(channel, cache string) []cell {
	var cells []cell
	for _, nm := range [][2]int{{1, 3}, {100, 3}, {1000, 3}, {10000, 3}, {1000, 100}} {
		for _, p := range []string{protoSotW, protoDelta} {
			cells = append(cells, cell{protocol: p, n: nm[0], m: nm[1], cache: cache, channel: channel})
		}
	}
	return append(cells, cell{protocol: protoDelta, n: 100000, m: 3, cache: cache, channel: channel})
}

// quickMatrix is small enough for seconds, and has a cell of every mode so
// that none can rot: the xDS clients alone on both protocols, the other
// cache mode, channels to reachable, unreachable and refused backends, and
// goxds's channel connecting on first RPC.
func quickMatrix() []cell {
	return []cell{
		{protocol: protoSotW, n: 1, m: 3, cache: cacheNonADS},
		{protocol: protoSotW, n: 100, m: 3, cache: cacheNonADS},
		{protocol: protoDelta, n: 100, m: 3, cache: cacheNonADS},
		{protocol: protoSotW, n: 100, m: 3, cache: cacheADS},
		{protocol: protoSotW, n: 100, m: 3, cache: cacheNonADS, channel: backendsReachable},
		{protocol: protoDelta, n: 100, m: 3, cache: cacheNonADS, channel: backendsUnreachable},
		{protocol: protoSotW, n: 100, m: 3, cache: cacheNonADS, channel: backendsRefused},
		{protocol: protoDelta, n: 100, m: 3, cache: cacheNonADS, channel: backendsReachable, firstRPC: true},
	}
}

type config struct {
	cells     []cell
	impls     map[string]bool
	repeat    int
	grpcOnce  int // grpc-go runs once from this N on
	grpcMaxN  int // grpc-go is not run above this N
	run       runOptions
	profile   string
	memprof   string
	verbose   bool
	wide      bool // -wide: the full report
	startedAt time.Time
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		n        = fs.Int("n", 0, "clusters (one cell with -m; default: the whole matrix)")
		m        = fs.Int("m", 3, "endpoints per cluster, with -n")
		protocol = fs.String("protocol", "both", "goxds protocol: sotw, delta or both (grpc-go speaks SotW only)")
		impl     = fs.String("impl", "all", "clients to run, comma-separated: goxds, grpc-go, bare (the decode-and-ACK reference; run in turns with goxds) or all")
		repeat   = fs.Int("repeat", 3, "runs per cell; the median is reported")
		rounds   = fs.Int("rounds", 50, "update rounds per run (one cluster's endpoints change per round)")
		resends  = fs.Int("resends", 5, "unchanged SotW CDS resends per run")
		quick    = fs.Bool("quick", false, "a small matrix, for smoke tests (N ≤ 100, one run, 5 rounds)")
		timeout  = fs.Duration("timeout", 5*time.Minute, "limit for one phase of one run (full config, one update)")
		maxRSS   = fs.Int64("max-rss-mib", 4096, "kill a client process whose resident memory goes above this many MiB (0: no limit)")
		settle   = fs.Duration("settle", 30*time.Second, "how long to wait for a client still busy after full config to go idle (if it does not, its updates are not measured)")
		grpcOnce = fs.Int("grpc-once-from", 10000, "run grpc-go once, not -repeat times, from this N on")
		grpcMax  = fs.Int("grpc-max-n", 10000, "do not run grpc-go above this N (it needs O(N²) requests)")
		profile  = fs.String("cpuprofile", "", "write a CPU profile of each client process to a file with this prefix")
		profUpd  = fs.Bool("profile-updates", false, "start the CPU profile after full config: profile the updates only")
		memprof  = fs.String("memprofile", "", "write a heap profile of each client process, at its end, to a file with this prefix (slows it)")
		verbose  = fs.Bool("v", false, "log each run")
		wide     = fs.Bool("wide", false, "print the full report: every column (about 200 wide), the full legend, the decode floors and each client's notes (default: a table that fits 80 columns)")
		channel  = fs.String("channel", "", "run gRPC channels (goxds: grpcxds; grpc-go: its xds:/// channel) to backends that are reachable (a gRPC server), unreachable (accept, never speak) or refused (nothing listens); empty: the xDS clients alone")
		cacheArg = fs.String("cache", cacheNonADS, "the go-control-plane snapshot cache's mode: non-ads (answers partial SotW subscriptions), ads (answers only complete ones) or both")
		every    = fs.Duration("round-every", -1, "start an update round at most this often (channel runs: spread the rounds over the failover and connect timeouts); -1: 1s with -channel unreachable, else back to back")
		firstRPC = fs.Bool("first-rpc", false, "channel runs: goxds's channel connects a cluster on its first RPC (grpcxds.Options.ConnectOnFirstRPC), and the harness calls only the clusters the rounds change and the first and last (grpc-go's channel connects every cluster regardless)")
		ackLimit = fs.Duration("ack-timeout", 30*time.Second, "channel runs: an update round not ACKed within this ends the rounds, and the row says how many were ACKed")
	)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	cfg := &config{
		repeat:   *repeat,
		grpcOnce: *grpcOnce,
		grpcMaxN: *grpcMax,
		impls:    make(map[string]bool),
		profile:  *profile,
		memprof:  *memprof,
		verbose:  *verbose,
		wide:     *wide,
		run: runOptions{rounds: *rounds, resends: *resends, timeout: *timeout, settle: *settle, profileUpdates: *profUpd, maxRSS: *maxRSS << 20,
			every: *every, ackLimit: *ackLimit},
	}
	switch *channel {
	case "", backendsReachable, backendsUnreachable, backendsRefused:
	default:
		return nil, fmt.Errorf("-channel %q: want %s, %s, %s or nothing", *channel, backendsReachable, backendsUnreachable, backendsRefused)
	}
	var caches []string
	switch *cacheArg {
	case cacheNonADS, cacheADS:
		caches = []string{*cacheArg}
	case "both":
		caches = []string{cacheNonADS, cacheADS}
	default:
		return nil, fmt.Errorf("-cache %q: want %s, %s or both", *cacheArg, cacheNonADS, cacheADS)
	}
	for _, name := range strings.Split(*impl, ",") {
		switch name {
		case "all":
			cfg.impls[implGoxds], cfg.impls[implGRPC], cfg.impls[implBare] = true, true, true
		case implGoxds, implGRPC, implBare:
			cfg.impls[name] = true
		default:
			return nil, fmt.Errorf("-impl %q: want goxds, grpc-go, bare or all, or a comma-separated list of them", *impl)
		}
	}
	if *firstRPC && *channel == "" {
		return nil, fmt.Errorf("-first-rpc needs -channel: it is how goxds's channel connects")
	}
	if *impl == implBare && *channel != "" {
		return nil, fmt.Errorf("-impl bare has no channel: -channel runs goxds or grpc-go")
	}
	protos := map[string]bool{}
	switch *protocol {
	case "both":
		protos[protoSotW], protos[protoDelta] = true, true
	case protoSotW, protoDelta:
		protos[*protocol] = true
	default:
		return nil, fmt.Errorf("-protocol %q: want sotw, delta or both", *protocol)
	}
	var cells []cell
	switch {
	case *n > 0:
		for _, cm := range caches {
			for _, p := range []string{protoSotW, protoDelta} {
				if protos[p] {
					cells = append(cells, cell{protocol: p, n: *n, m: *m, cache: cm, channel: *channel, firstRPC: *firstRPC})
				}
			}
		}
	case *quick:
		cells = quickMatrix()
		cfg.repeat, cfg.run.rounds, cfg.run.resends = 1, min(cfg.run.rounds, 5), min(cfg.run.resends, 2)
		if cfg.run.every < 0 {
			cfg.run.every = 0 // seconds, not the unreachable default
		}
	default:
		for _, cm := range caches {
			for _, c := range fullMatrix(*channel, cm) {
				c.firstRPC = *firstRPC
				cells = append(cells, c)
			}
		}
	}
	for _, c := range cells {
		if protos[c.protocol] {
			cfg.cells = append(cfg.cells, c)
		}
	}
	if cfg.repeat < 1 || cfg.run.rounds < 0 || len(cfg.cells) == 0 {
		return nil, fmt.Errorf("nothing to run")
	}
	return cfg, nil
}

// run runs the matrix of args and prints the table to out.
func run(ctx context.Context, args []string, out, log io.Writer) error {
	_, err := runMatrix(ctx, args, out, log)
	return err
}

// runMatrix is run, returning the report too.
func runMatrix(ctx context.Context, args []string, out, log io.Writer) (*report, error) {
	cfg, err := parseFlags(args, log)
	if err != nil {
		return nil, err
	}
	cfg.startedAt = time.Now()
	cfg.run.logf = func(format string, a ...any) {
		if cfg.verbose {
			fmt.Fprintf(log, format+"\n", a...)
		}
	}
	rep := newReport(cfg)
	prog := newProgress(log, cfg)
	// grpc-go speaks SotW only: its result for a world size serves as the
	// baseline of both protocols' cells.
	baselines := make(map[baselineKey]*result)
	// The floors of a world size are the same for both protocols' cells.
	floorsOf := make(map[[2]int]floors)
	if channelRun(cfg) {
		// A channel holds a socket per endpoint, and so do the backends.
		limit := raiseFileLimit(fileLimitFor(maxEndpoints(cfg)))
		for _, c := range cfg.cells {
			// The most clusters a channel of the cell connects: grpc-go's,
			// when it runs, connects every one.
			connects := channelClusters(implGoxds, c, cfg.run.rounds)
			if cfg.impls[implGRPC] && c.n <= cfg.grpcMaxN {
				connects = c.n
			}
			if c.channel != "" && c.channel != backendsRefused && healthyFor(connects, c.m, limit) == 0 {
				return nil, fmt.Errorf("%s: a channel connects at least one endpoint per cluster, %d sockets, and the open-file limit is %d "+
					"(it cannot be raised further here): run -channel %s, which holds no socket, -first-rpc, or fewer clusters", c, connects, limit, backendsRefused)
			}
		}
	}
	for _, c := range cfg.cells {
		key := baselineOf(c)
		if cfg.impls[implGRPC] && baselines[key] == nil && c.n <= cfg.grpcMaxN {
			times := cfg.repeat
			if c.n >= cfg.grpcOnce {
				times = 1
			}
			bc := c
			bc.protocol = protoSotW
			r, err := measure(ctx, cfg, implGRPC, bc, times, prog)
			if err != nil {
				return nil, err
			}
			baselines[key] = r
		}
		var mine, bare *result
		switch impls := cellImpls(cfg, c); len(impls) {
		case 0:
		case 1:
			var rs []*result
			if rs, err = measureInterleaved(ctx, cfg, impls, c, cfg.repeat, prog); err != nil {
				return nil, err
			}
			if impls[0] == implBare {
				bare = rs[0]
			} else {
				mine = rs[0]
			}
		default:
			var rs []*result
			if rs, err = measureInterleaved(ctx, cfg, impls, c, cfg.repeat, prog); err != nil {
				return nil, err
			}
			bare, mine = rs[0], rs[1]
		}
		f, ok := floorsOf[[2]int{c.n, c.m}]
		if !ok {
			if cfg.verbose {
				fmt.Fprintf(log, "measuring the decode floor of N=%d M=%d\n", c.n, c.m)
			}
			f = measureFloors(newWorld(c.n, c.m, false, basePort, c.m))
			floorsOf[[2]int{c.n, c.m}] = f
		}
		rep.add(c, mine, bare, baselines[key], f)
	}
	prog.finish()
	rep.print(out)
	return rep, nil
}

// cellImpls lists the clients other than grpc-go that run on cell c, the
// bare client first: it has no channel, so channel cells leave it out.
func cellImpls(cfg *config, c cell) []string {
	var impls []string
	if cfg.impls[implBare] && c.channel == "" {
		impls = append(impls, implBare)
	}
	if cfg.impls[implGoxds] {
		impls = append(impls, implGoxds)
	}
	return impls
}

// baselineKey says which cells share a grpc-go run: grpc-go speaks SotW
// only, so its run for a world size, cache mode and channel mode serves as
// the baseline of both protocols' cells.
type baselineKey struct {
	n, m           int
	cache, channel string
}

func baselineOf(c cell) baselineKey { return baselineKey{c.n, c.m, c.cache, c.channel} }

// channelRun reports whether some cell of cfg runs channels.
func channelRun(cfg *config) bool { return maxEndpoints(cfg) > 0 }

// maxEndpoints is the largest world, in endpoints, of cfg's channel cells.
func maxEndpoints(cfg *config) (n int) {
	for _, c := range cfg.cells {
		if c.channel != "" {
			n = max(n, c.n*c.m)
		}
	}
	return n
}

// measure runs one client times times and returns the median of each
// measurement.
func measure(ctx context.Context, cfg *config, impl string, c cell, times int, prog *progress) (*result, error) {
	rs, err := measureInterleaved(ctx, cfg, []string{impl}, c, times, prog)
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

// measureInterleaved runs each of impls times on cell c, in turns (one run
// of each, then the next round), and returns the median of each. Turns, not
// one client's runs in a row, so that a change in the machine's load falls
// on every client alike: the ratios between them are what is quoted.
func measureInterleaved(ctx context.Context, cfg *config, impls []string, c cell, times int, prog *progress) ([]*result, error) {
	rs := make([][]result, len(impls))
	for i := range times {
		for k, impl := range impls {
			r, err := runMeasured(ctx, cfg, impl, c, i, times, prog)
			if err != nil {
				return nil, err
			}
			rs[k] = append(rs[k], r)
		}
	}
	out := make([]*result, len(impls))
	for k := range impls {
		med := median(rs[k])
		out[k] = &med
	}
	return out, nil
}

// runMeasured is run i of times of impl on cell c, with the profiles asked for.
func runMeasured(ctx context.Context, cfg *config, impl string, c cell, i, times int, prog *progress) (result, error) {
	o := cfg.run
	o.partial = impl == implGRPC
	tag := fmt.Sprintf("%s-%s-n%d-m%d-%s", impl, c.protocol, c.n, c.m, c.cache)
	if c.channel != "" {
		tag += "-chan-" + c.channel
	}
	if cfg.profile != "" {
		o.profile = fmt.Sprintf("%s-%s-%d.pprof", cfg.profile, tag, i)
	}
	if cfg.memprof != "" {
		o.memprof = fmt.Sprintf("%s-%s-%d.pprof", cfg.memprof, tag, i)
	}
	started := prog.run(impl, c, i, times)
	r, err := runOnce(ctx, impl, c, o)
	if err != nil {
		return result{}, fmt.Errorf("%s %s: %w", impl, c, err)
	}
	prog.ran(started, &r)
	return r, nil
}
