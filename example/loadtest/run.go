package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/goxds/xds/testutils"
)

// result is one run of one client against one world.
type result struct {
	impl, protocol string
	n, m           int
	cache          string // the server's cache mode
	channel        string // the backends' behaviour in a channel run; "" otherwise

	// Resolving, measured at the server: stream open → every EDS resource
	// ACKed; what the client sent until then.
	ttfc                 time.Duration
	reqs, names, bytesIn int64
	reqsByType           map[string]int64
	bytesOut             int64
	// Resolving, measured at the client: CPU and peak RSS when the server
	// saw full config (cpu, rss: what the table shows), and once the
	// client went idle after it (settledCPU, settledRSS): a client ACKs
	// before its watchers have heard. capped: the client was still busy
	// when the settle limit ran out, so the settled figures are lower
	// bounds and the updates were not measured (grpc-go at 10,000
	// clusters, which keeps working on a backlog for minutes).
	cpu, settledCPU time.Duration
	rss, settledRSS int64
	capped          bool
	// incomplete: the client did not reach full config within the phase
	// limit (grpc-go at 10,000 clusters may not, on 2 cores). ttfc is then
	// the limit, and cpu, rss and the request counts what the client had
	// reached by then: lower bounds. Nothing after resolving is measured.
	incomplete bool

	// Updates: one cluster's endpoints change per round.
	updP50, updP99   time.Duration // the change is made → its ACK
	pushP50, pushP99 time.Duration // the response leaves the server → its ACK
	updCPU           time.Duration // client CPU per update
	// resendCPU is the client CPU per unchanged SotW CDS resend (SotW only).
	resendCPU time.Duration
	// Delta reconnection: resources the server sent again on the new
	// stream, and of how many; -1 when not measured.
	resent, resentOf int

	nacks int64
	// The whole run, updates included: peak RSS (bytes) and CPU.
	totalRSS int64
	totalCPU time.Duration
	info     string // the client's own account of its state at the end
	runs     int    // how many runs this is the median of

	chanResult
}

type runOptions struct {
	rounds, resends int
	timeout         time.Duration
	settle          time.Duration // how long to wait for a busy client to go idle
	maxRSS          int64         // the watchdog kills a client above this RSS
	logf            func(format string, args ...any)
	profile         string // a CPU profile of the child goes here, if set
	profileUpdates  bool   // the profile covers the updates, not the resolving
	memprof         string // a heap profile of the child goes here, if set
	// partial reports a client that does not reach full config within
	// timeout as an incomplete result instead of an error: for the
	// baseline, whose slowness is what is being measured.
	partial bool
	// Channel runs: rounds start at most this often (0: back to back; -1:
	// 1 s to unreachable backends, else 0), and a round not ACKed within
	// ackLimit ends the rounds.
	every, ackLimit time.Duration
}

// runOnce starts a server with a world of n clusters × m endpoints, and a
// client process of impl speaking protocol, and measures it.
func runOnce(ctx context.Context, impl string, c cell, o runOptions) (res result, err error) {
	protocol, n, m := c.protocol, c.n, c.m
	delta := protocol == protoDelta
	res = result{impl: impl, protocol: protocol, n: n, m: m, cache: c.cache, channel: c.channel, resent: -1}
	port, healthy := uint32(basePort), m
	var be *backends
	if c.channel != "" {
		connects := channelClusters(impl, c, o.rounds)
		if c.channel != backendsRefused { // a refused connection holds no socket
			if healthy = healthyFor(connects, m, fileLimit()); healthy == 0 {
				return res, fmt.Errorf("the open-file limit %d leaves no socket for every cluster's endpoint", fileLimit())
			}
		}
		want := connects * healthy
		if be, err = startBackends(c.channel, want); err != nil {
			return res, err
		}
		defer be.stop()
		port = be.port
	}
	res.healthy = healthy
	w := newWorld(n, m, delta, port, healthy)
	tr := newTracker(n)
	srv, err := startServer(tr, c.cache == cacheADS)
	if err != nil {
		return res, err
	}
	defer srv.stop()
	if err := srv.set(w.snap); err != nil {
		return res, err
	}
	apiType := testutils.APITypeSotW
	if delta {
		apiType = testutils.APITypeDelta
	}
	bs := testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI:      srv.addr,
		APIType:        apiType,
		ServerFeatures: []string{"xds_v3"},
		NodeID:         nodeID,
	})
	env := []string{envServer + "=" + srv.addr, envProtocol + "=" + protocol}
	if o.profile != "" {
		env = append(env, "LOADTEST_CPUPROFILE="+o.profile)
		if o.profileUpdates {
			env = append(env, "LOADTEST_CPUPROFILE_UPDATES=1")
		}
	}
	if o.memprof != "" {
		env = append(env, "LOADTEST_MEMPROFILE="+o.memprof)
	}
	if c.channel != "" {
		env = append(env, envChannel+"="+c.channel, fmt.Sprintf("%s=%d", envFiles, fileLimitFor(n*m)))
		if firstRPC(impl, c) {
			env = append(env, envFirstRPC+"=1")
		}
	}
	ch, err := startChild(impl, bs, env)
	if err != nil {
		return res, err
	}
	ch.watchdog(o.maxRSS)
	defer func() {
		if rss := ch.killedAt.Load(); rss > 0 && err != nil {
			err = fmt.Errorf("%w (the client was killed: resident memory %s, above -max-rss)", err, fmtBytes(rss))
		}
	}()
	stopped := false
	defer func() {
		if !stopped {
			_ = ch.stop()
		}
	}()

	// Resolve.
	select {
	case <-tr.full:
	case <-ch.exited:
		return res, fmt.Errorf("client exited before full config: %s", ch.stderr)
	case <-time.After(o.timeout):
		if !o.partial {
			return res, fmt.Errorf("no full config within %v", o.timeout)
		}
		return incompleteResult(res, ch, tr, o)
	case <-ctx.Done():
		return res, ctx.Err()
	}
	u, err := ch.usage()
	if err != nil {
		return res, err
	}
	res.cpu, res.rss = u.cpu, u.maxRSS
	st := tr.fullStats()
	res.ttfc, res.reqsByType = st.took, st.reqs
	res.reqs, res.names, res.bytesIn, res.bytesOut = st.totalReqs, st.totalNames, st.bytesIn, st.bytesOut
	if u, res.capped, err = ch.settle(o.settle, o.logf); err != nil {
		return res, err
	}
	res.settledCPU, res.settledRSS = u.cpu, u.maxRSS
	o.logf("  %s %s N=%d M=%d: full config in %v (CPU %v, peak RSS %s; settled: CPU %v, peak RSS %s, capped %v); %s", impl, protocol, n, m,
		res.ttfc.Round(time.Millisecond), res.cpu.Round(time.Millisecond), fmtBytes(res.rss),
		res.settledCPU.Round(time.Millisecond), fmtBytes(res.settledRSS), res.capped, u.info)
	o.logf("  %s", tr.timeline())
	if be != nil {
		// The channel's own measurements replace the xDS client's rounds.
		// They are made even if the client is still busy: a channel whose
		// endpoints do not connect may never go idle, and whether it keeps
		// ACKing then is what is measured.
		opened, _, _, _ := tr.streamState()
		res.idle = ch.lastBusy.Sub(opened.Add(res.ttfc))
		// The channel's rounds are its updates: the profile starts before
		// them (below, it started after them, and held the resends only).
		if o.profileUpdates {
			if err := ch.startProfile(); err != nil {
				return res, err
			}
		}
		if err := channelRounds(ctx, &res, w, srv, tr, be, ch, o, firstRPC(impl, c)); err != nil {
			return res, err
		}
		o.rounds = 0
	}
	if res.capped {
		// Still busy with the resolving: updates would only queue behind
		// it, and their CPU could not be told from it.
		o.rounds, o.resends = 0, 0
		delta = false // no reconnection either
	}

	// Update one cluster's endpoints per round.
	if o.profileUpdates {
		if err := ch.startProfile(); err != nil {
			return res, err
		}
	}
	if o.rounds > 0 {
		var lat, push []time.Duration
		before := u
		for r := 1; r <= o.rounds; r++ {
			i := (r * 7919) % n
			name := clusterName(i)
			snap, version := w.withChange(edsURL, name, w.endpointsAt(i, r))
			if delta {
				version = snap.sets[edsURL].hashes[name]
			}
			l, p, err := update(ctx, srv, tr, snap, edsURL, version, name, o.timeout)
			if err != nil {
				return res, fmt.Errorf("update round %d: %w", r, err)
			}
			lat, push = append(lat, l), append(push, p)
			// Let the client finish what it does after the ACK before
			// the next change, so that rounds do not overlap.
			time.Sleep(2*time.Millisecond + l)
		}
		after, _, err := ch.settle(o.settle, o.logf)
		if err != nil {
			return res, err
		}
		res.updCPU = (after.cpu - before.cpu) / time.Duration(o.rounds)
		res.updP50, res.updP99 = percentile(lat, 50), percentile(lat, 99)
		res.pushP50, res.pushP99 = percentile(push, 50), percentile(push, 99)
		u = after
	}

	// SotW: resend the clusters unchanged, under a new version.
	if !delta && o.resends > 0 {
		before := u
		for r := 1; r <= o.resends; r++ {
			snap, version := w.withChange(cdsURL, "", nil)
			l, _, err := update(ctx, srv, tr, snap, cdsURL, version, "", o.timeout)
			if err != nil {
				return res, fmt.Errorf("CDS resend %d: %w", r, err)
			}
			time.Sleep(2*time.Millisecond + l)
		}
		after, _, err := ch.settle(o.settle, o.logf)
		if err != nil {
			return res, err
		}
		res.resendCPU = (after.cpu - before.cpu) / time.Duration(o.resends)
	}

	// Delta: reconnect; the client names what it holds in
	// initial_resource_versions, so nothing unchanged should come again.
	if delta {
		if res.resent, err = reconnect(ctx, srv, tr, o.timeout); err != nil {
			return res, fmt.Errorf("reconnect: %w", err)
		}
		res.resentOf = 2 + 2*n
	}

	final, err := ch.usage()
	if err != nil {
		return res, err
	}
	res.info = final.info
	res.nacks = tr.nackCount()
	stopped = true
	if err := ch.stop(); err != nil {
		return res, err
	}
	// The last usage answer, just before stop, has the peak RSS and the
	// CPU of the whole run, counted like every other CPU figure from the
	// client's creation.
	res.totalRSS, res.totalCPU = final.maxRSS, final.cpu
	if msg := ch.stderr.String(); msg != "" {
		o.logf("  client stderr: %s", msg)
	}
	return res, nil
}

// update makes snap the server's state and waits for the client to ACK the
// response of typeURL with version (SotW) or carrying name at version
// (delta). It returns the time from the change to the ACK, and from the
// response leaving the server to the ACK.
func update(ctx context.Context, srv *xdsServer, tr *tracker, snap *snapshot, typeURL, version, name string, timeout time.Duration) (lat, push time.Duration, err error) {
	start := time.Now()
	wt, err := pushAndWait(ctx, srv, tr, snap, typeURL, version, name, timeout)
	if err != nil {
		return 0, 0, err
	}
	return wt.ackedAt.Sub(start), wt.ackedAt.Sub(wt.sentAt), nil
}

// errNoACK is pushAndWait's error for a response not ACKed in time.
var errNoACK = errors.New("no ACK")

// pushAndWait makes snap the server's state and waits, up to timeout, for
// the client to ACK the response of typeURL with version (SotW) or
// carrying name at version (delta). It returns the wait, which says when
// the response left and when its ACK came.
func pushAndWait(ctx context.Context, srv *xdsServer, tr *tracker, snap *snapshot, typeURL, version, name string, timeout time.Duration) (*updateWait, error) {
	wt := tr.expect(typeURL, version, name)
	if err := srv.set(snap); err != nil {
		return nil, err
	}
	select {
	case <-wt.done:
	case <-time.After(timeout):
		return nil, fmt.Errorf("%w of %s version %q within %v", errNoACK, typeURL, version, timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if wt.nacked {
		return nil, errors.New("the client NACKed the update")
	}
	return wt, nil
}

// reconnect restarts the server and returns how many resources it sent on
// the client's new stream once the client has resubscribed to every type
// and gone quiet.
func reconnect(ctx context.Context, srv *xdsServer, tr *tracker, timeout time.Duration) (int, error) {
	restarted := time.Now()
	if err := srv.restart(); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		opened, types, resent, lastReq := tr.streamState()
		if opened.After(restarted) && types == len(typeURLs) && time.Since(lastReq) > 300*time.Millisecond {
			return resent, nil
		}
	}
	return 0, fmt.Errorf("the client did not resubscribe within %v", timeout)
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100 // nearest rank
	return s[max(i-1, 0)]
}

// incompleteResult is res for a client that did not reach full config
// within o.timeout: what it had used and sent by then.
func incompleteResult(res result, ch *child, tr *tracker, o runOptions) (result, error) {
	u, err := ch.usage()
	if err != nil {
		return res, fmt.Errorf("no full config within %v, and no usage: %w", o.timeout, err)
	}
	st := tr.statsSoFar()
	res.incomplete, res.ttfc = true, o.timeout
	res.cpu, res.rss, res.totalCPU, res.totalRSS = u.cpu, u.maxRSS, u.cpu, u.maxRSS
	res.reqsByType, res.reqs, res.names = st.reqs, st.totalReqs, st.totalNames
	res.bytesIn, res.bytesOut = st.bytesIn, st.bytesOut
	res.nacks, res.info = tr.nackCount(), u.info
	o.logf("  %s %s N=%d M=%d: no full config within %v (CPU %v, peak RSS %s, %d requests so far)",
		res.impl, res.protocol, res.n, res.m, o.timeout, u.cpu.Round(time.Millisecond), fmtBytes(u.maxRSS), st.totalReqs)
	return res, nil
}

// firstRPC reports whether impl's channel in cell c connects a cluster on
// its first RPC: goxds's, when the cell says so.
func firstRPC(impl string, c cell) bool { return c.firstRPC && impl == implGoxds && c.channel != "" }

// channelClusters is how many clusters impl's channel in cell c connects:
// every one, or on first RPC those the harness calls (usedClusters).
func channelClusters(impl string, c cell, rounds int) int {
	if firstRPC(impl, c) {
		return len(usedClusters(c.n, rounds))
	}
	return c.n
}
