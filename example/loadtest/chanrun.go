package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"
)

// chanResult is what a channel run measures beyond the xDS client's
// figures. The same for goxds and grpc-go: every event is seen at the
// management server or at the backends, none inside the client.
type chanResult struct {
	// healthy endpoints of each cluster's m are not UNHEALTHY, so a
	// channel connects to them: all m unless the open-file limit does not
	// allow a socket for each of the n × m (healthyFor).
	healthy int
	// connected: stream open → the first connection to the last endpoint
	// of the initial world, at the backends (every subchannel created and
	// dialled); connectedHosts of wantHosts endpoints had had a connection
	// when the harness stopped waiting (the phase limit).
	connected                 time.Duration
	connectedHosts, wantHosts int
	// idle: full config → the client's last CPU use before it went idle
	// (50 ms windows), or the settle limit.
	idle time.Duration
	// probe: reachable backends only. After the initial world settled, an
	// RPC to the route of the first and the last cluster; after the last
	// round, one to the route of the cluster it changed, which must be
	// served at one of its new endpoints. "ok", or what went wrong.
	probe string

	// Update rounds, one cluster's endpoints all replaced by new addresses
	// per round. rounds were made, acked were ACKed (a round not ACKed
	// within -ack-timeout ends them), applied saw a connection to one of
	// the cluster's new endpoints within -ack-timeout of its push.
	rounds, acked, applied int
	// Per round: push (the response leaves the server) → its ACK; push →
	// the first connection to a new endpoint (the channel applied it: its
	// balancer has the new endpoints and dials them); the client's CPU
	// from the round's start until it went idle again.
	ackMed, ackMax     time.Duration
	applyMed, applyMax time.Duration
	cpuMed, cpuMax     time.Duration
}

// channelRounds measures a channel run once the server saw full config:
// its connecting, an RPC through it (reachable backends), and o.rounds
// update rounds.
//
// With firstRPC the channel connects a cluster on its first RPC: the
// harness calls the clusters it measures (usedClusters) first, and those
// are the endpoints it waits for.
func channelRounds(ctx context.Context, res *result, w *world, srv *xdsServer, tr *tracker, be *backends, ch *child, o runOptions, firstRPC bool) error {
	n, m, healthy := res.n, res.m, res.healthy
	opened, _, _, _ := tr.streamState()
	fullAt := opened.Add(res.ttfc)
	refused := be.mode == backendsRefused
	used := n
	if firstRPC {
		clusters := usedClusters(n, o.rounds)
		used = len(clusters)
		for _, i := range clusters {
			if err := ch.touch(i); err != nil {
				return err
			}
		}
	}
	if !refused {
		res.wantHosts = used * healthy
		select {
		case <-be.all:
		case <-time.After(o.timeout):
			o.logf("  not every endpoint connected within %v", o.timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
		hosts, last := be.connected()
		res.connectedHosts, res.connected = min(hosts, res.wantHosts), last.Sub(opened)
	}

	res.probe = "-"
	if be.mode == backendsReachable {
		res.probe = "ok"
		for _, i := range []int{0, n - 1} {
			if err := probeServedBy(ch, i, hostsOf(n, i, m, 0)[:healthy]); err != nil {
				res.probe = err.Error()
				break
			}
		}
	}

	every := o.every
	if every < 0 {
		every = 0
		if be.mode == backendsUnreachable {
			every = time.Second
		}
	}
	var acks, lats, applies, cpus []time.Duration
	start := time.Now()
	lastChanged := -1
	for r := 1; r <= o.rounds; r++ {
		if wait := time.Until(start.Add(time.Duration(r-1) * every)); wait > 0 {
			select {
			case <-time.After(wait): // pacing the rounds, not waiting for an event
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		before, err := ch.usage()
		if err != nil {
			return err
		}
		i := roundCluster(n, r)
		name := clusterName(i)
		cw := be.expect(hostsOf(n, i, m, r)[:healthy])
		snap, version := w.withChange(edsURL, name, w.endpointsAt(i, r))
		if w.delta {
			version = snap.sets[edsURL].hashes[name]
		}
		res.rounds++
		changed := time.Now()
		wt, err := pushAndWait(ctx, srv, tr, snap, edsURL, version, name, o.ackLimit)
		if errors.Is(err, errNoACK) {
			o.logf("  round %d: %v", r, err)
			break
		}
		if err != nil {
			return fmt.Errorf("update round %d: %w", r, err)
		}
		res.acked++
		lastChanged = i
		acks, lats = append(acks, wt.ackedAt.Sub(wt.sentAt)), append(lats, wt.ackedAt.Sub(changed))
		applied := "-"
		select {
		case <-cw.done:
			if refused { // cannot happen: nothing listens
				return fmt.Errorf("round %d: a connection to a refused endpoint was accepted: the port is another's", r)
			}
			res.applied++
			applies = append(applies, cw.at.Sub(wt.sentAt))
			applied = fmtDur(cw.at.Sub(wt.sentAt))
		case <-time.After(o.ackLimit):
			o.logf("  round %d: no connection to a new endpoint of %s within %v", r, name, o.ackLimit)
		case <-refusedDone(refused):
		case <-ctx.Done():
			return ctx.Err()
		}
		after, _, err := ch.settle(max(every, 2*time.Second), o.logf)
		if err != nil {
			return err
		}
		cpus = append(cpus, after.cpu-before.cpu)
		o.logf("    round %d at %s after full config: push→ACK %s, push→applied %s, CPU %s", r,
			fmtDur(before.at.Sub(fullAt)), fmtDur(acks[len(acks)-1]), applied, fmtDur(after.cpu-before.cpu))
	}
	res.ackMed, res.ackMax = percentile(acks, 50), percentile(acks, 100)
	res.applyMed, res.applyMax = percentile(applies, 50), percentile(applies, 100)
	res.cpuMed, res.cpuMax = percentile(cpus, 50), percentile(cpus, 100)
	// The main table's update columns, as the xDS clients' rounds fill
	// them (their CPU: the mean per round).
	res.updP50, res.updP99 = percentile(lats, 50), percentile(lats, 99)
	res.pushP50, res.pushP99 = percentile(acks, 50), percentile(acks, 99)
	var total time.Duration
	for _, c := range cpus {
		total += c
	}
	if len(cpus) > 0 {
		res.updCPU = total / time.Duration(len(cpus))
	}
	if be.mode == backendsReachable && lastChanged >= 0 && res.probe == "ok" {
		if err := probeServedBy(ch, lastChanged, hostsOf(n, lastChanged, m, res.acked)[:healthy]); err != nil {
			res.probe = "after the last round: " + err.Error()
		}
	}
	return nil
}

// probeServedBy makes the child send an RPC to the route of cluster i and
// checks that one of hosts served it.
func probeServedBy(ch *child, i int, hosts []string) error {
	at, _, err := ch.probe(i)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(at)
	if err != nil {
		return fmt.Errorf("RPC to the route of %s served at %q: %w", clusterName(i), at, err)
	}
	if !slices.Contains(hosts, host) {
		return fmt.Errorf("RPC to the route of %s served at %s, not one of its endpoints %v", clusterName(i), host, hosts)
	}
	return nil
}

// refusedDone is a closed channel if refused (a round's apply is not
// waited for), else nil (never ready).
func refusedDone(refused bool) <-chan struct{} {
	if !refused {
		return nil
	}
	c := make(chan struct{})
	close(c)
	return c
}

// usedClusters are the clusters a channel run calls: the first and the
// last (the probes) and those of the update rounds, in that order, once
// each.
func usedClusters(n, rounds int) []int {
	out := []int{0}
	seen := map[int]bool{0: true}
	for _, i := range append([]int{n - 1}, roundClusters(n, rounds)...) {
		if !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	return out
}

// roundClusters are the clusters the update rounds change, round 1 first.
func roundClusters(n, rounds int) []int {
	out := make([]int, rounds)
	for r := 1; r <= rounds; r++ {
		out[r-1] = roundCluster(n, r)
	}
	return out
}

// roundCluster is the cluster update round r changes: rounds spread over
// the world.
func roundCluster(n, r int) int { return (r * 7919) % n }
