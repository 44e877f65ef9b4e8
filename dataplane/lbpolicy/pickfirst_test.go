package lbpolicy

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
)

// pfOwner is a leaf under pick_first over endpoints "a", "b", ... of one
// locality, none connected, and the owner's side of it: it wants in the
// pool what the leaf wants, as a cluster does each time it builds a
// picker.
type pfOwner struct {
	*testLeaf
	wanted map[*endpoint.Endpoint]bool
	clk    *fakeClock
	picker Picker
}

func newPFOwner(n int) *pfOwner {
	l := &testLeaf{Leaf: &Leaf{Policy: &resources.LBPolicy{Kind: resources.LBPickFirst}}, pool: endpoint.NewPool(fakeDialer{}, nil)}
	loc := Locality{Weight: 1}
	for i := range n {
		ep, _ := l.pool.Get([]string{string(rune('a' + i))}, "")
		loc.Endpoints = append(loc.Endpoints, WeightedEndpoint{ep, 1})
	}
	l.Localities = []Locality{loc}
	o := &pfOwner{testLeaf: l, wanted: make(map[*endpoint.Endpoint]bool), clk: &fakeClock{now: time.Unix(1000, 0)}}
	l.Clock = o.clk
	l.Repick = func(f func()) { f(); o.update() }
	o.update()
	return o
}

// update wants what the leaf wants, then builds its picker.
func (o *pfOwner) update() {
	now := make(map[*endpoint.Endpoint]struct{})
	o.Want(now)
	for ep := range now {
		if !o.wanted[ep] {
			o.pool.Want(ep)
		}
	}
	for ep := range o.wanted {
		if _, ok := now[ep]; !ok {
			o.pool.Unwant(ep)
		}
	}
	o.wanted = make(map[*endpoint.Endpoint]bool)
	for ep := range now {
		o.wanted[ep] = true
	}
	o.pool.Reconnect()
	o.picker = o.Picker()
}

// set reports s for the endpoint named name, and updates.
func (o *pfOwner) set(name string, s endpoint.State) {
	ep := o.pool.Lookup(name)
	o.pool.SetState(ep, ep.Conn(), s, nil)
	o.update()
}

// check fails the test unless the endpoints wanted are want (names in
// order) and the picker picks pick ("" for no picker, "idle" for one
// answering ErrIdle).
func (o *pfOwner) check(t *testing.T, step, want, pick string) {
	t.Helper()
	var got []string
	for ep := range o.wanted {
		got = append(got, ep.Key())
	}
	slices.Sort(got)
	if strings.Join(got, "") != want {
		t.Errorf("%s: wanted %q, want %q", step, strings.Join(got, ""), want)
	}
	picked := ""
	if o.picker != nil {
		res, err := o.picker.Pick(0)
		switch {
		case err == ErrIdle:
			picked = "idle"
		case err != nil:
			t.Fatalf("%s: pick: %v", step, err)
		default:
			picked = res.Endpoint.Key()
		}
	}
	if picked != pick {
		t.Errorf("%s: picked %q, want %q", step, picked, pick)
	}
}

// pick_first wants one endpoint at a time, in order (gRFC A62): the next
// when the last one started fails, or has been connecting for its Happy
// Eyeballs turn; the first ready is chosen and the others are not wanted
// any more; every one failing, all stay wanted (their connections try
// again after their backoff) until one is ready; the chosen one lost, it
// is idle until asked, then a new pass starts from the first.
func TestPickFirstOneAtATime(t *testing.T) {
	o := newPFOwner(4)
	o.check(t, "at first", "a", "")
	o.set("a", endpoint.Connecting)
	o.check(t, "a connecting", "a", "")
	o.set("a", endpoint.TransientFailure)
	o.check(t, "a failed", "ab", "")
	o.set("b", endpoint.Connecting)
	o.clk.advance(HappyEyeballsDelay - time.Millisecond)
	o.check(t, "b connecting for 249ms", "ab", "")
	o.clk.advance(time.Millisecond)
	o.check(t, "b connecting for 250ms", "abc", "")
	o.set("c", endpoint.Connecting)
	o.set("c", endpoint.TransientFailure)
	o.check(t, "c failed, b still trying", "abcd", "")
	o.set("d", endpoint.TransientFailure)
	o.check(t, "d failed, b still trying", "abcd", "")
	o.set("b", endpoint.TransientFailure)
	o.check(t, "every one failed: all tried again", "abcd", "")
	o.set("c", endpoint.Ready)
	o.check(t, "c ready", "c", "c")
	o.set("a", endpoint.Ready) // connected by another user of the pool
	o.check(t, "a ready too", "c", "c")
	o.set("a", endpoint.TransientFailure)
	o.set("c", endpoint.Idle)
	o.check(t, "c lost: idle", "", "idle")
	o.ExitIdle()
	o.update()
	// a and b, whose connections last reported TRANSIENT_FAILURE, are
	// passed over at once; c is started, d's turn waits.
	o.check(t, "c lost, then asked: a new pass", "abc", "")
	o.set("c", endpoint.Ready)
	o.check(t, "c ready again", "c", "c")
	running := 0
	for _, tm := range o.clk.timers {
		if !tm.stopped {
			running++
		}
	}
	if running != 0 {
		t.Errorf("%d Happy Eyeballs timers left running once an endpoint is chosen", running)
	}
}

// A turn's timer set for an endpoint that fails before its turn ends does
// not start the one after the next early: each endpoint started gets its
// whole turn.
func TestPickFirstTurnRestartsOnFailure(t *testing.T) {
	o := newPFOwner(3)
	o.set("a", endpoint.Connecting)
	o.clk.advance(200 * time.Millisecond)
	o.set("a", endpoint.TransientFailure)
	o.check(t, "a failed after 200ms", "ab", "")
	o.set("b", endpoint.Connecting)
	o.clk.advance(HappyEyeballsDelay - time.Millisecond)
	o.check(t, "b connecting for 249ms", "ab", "")
	o.clk.advance(time.Millisecond)
	o.check(t, "b connecting for 250ms", "abc", "")
}

// The chosen endpoint losing its connection makes pick_first idle (gRFC
// A62): it wants nothing, whatever the time, and its picker answers
// ErrIdle, until ExitIdle (a request asked); then a new pass starts from
// the first endpoint, which gets its turn though its state is still the
// TRANSIENT_FAILURE of the pass before (its connection is idle again,
// not failing): the endpoints are connected in order, as gRPC's
// pick_first connects them afresh.
func TestPickFirstIdleAfterLoss(t *testing.T) {
	o := newPFOwner(3)
	o.set("a", endpoint.Connecting)
	o.set("a", endpoint.TransientFailure)
	o.set("b", endpoint.Ready)
	o.check(t, "b ready", "b", "b")
	o.set("a", endpoint.Idle) // a's backoff over: idle, unwanted
	o.set("b", endpoint.Idle)
	o.check(t, "b lost", "", "idle")
	if !o.Idle() {
		t.Error("b lost: the leaf is not Idle")
	}
	o.clk.advance(10 * HappyEyeballsDelay)
	o.update()
	o.check(t, "b lost, time passes", "", "idle")
	if !o.ExitIdle() {
		t.Fatal("ExitIdle found no idle group")
	}
	o.update()
	if o.Idle() {
		t.Error("after ExitIdle: the leaf is still Idle")
	}
	o.check(t, "asked: a's turn", "a", "")
	o.set("a", endpoint.Connecting)
	o.set("a", endpoint.TransientFailure)
	o.check(t, "a failed: b's turn", "ab", "")
	o.set("b", endpoint.Connecting)
	o.set("b", endpoint.TransientFailure)
	o.check(t, "b failed: c's turn", "abc", "")
	o.set("c", endpoint.Ready)
	o.check(t, "c ready", "c", "c")
	if o.ExitIdle() {
		t.Error("ExitIdle with c chosen reported an idle group")
	}
}

// The chosen endpoint ejected by outlier detection (its connection
// kept) starts a new pass at once: only a lost connection makes
// pick_first idle.
func TestPickFirstEjectedStartsNewPass(t *testing.T) {
	o := newPFOwner(2)
	o.set("a", endpoint.Ready)
	o.check(t, "a ready", "a", "a")
	o.Ejected = ejectAll{o.pool.Lookup("a"): true}
	o.update()
	o.check(t, "a ejected", "ab", "")
}

// A configuration that comes while pick_first is idle leaves it idle (as
// gRPC's pick_first stays IDLE through an address update): the next
// leaf, handed Before, wants nothing until asked.
func TestPickFirstIdleAcrossUpdate(t *testing.T) {
	o := newPFOwner(2)
	o.set("a", endpoint.Ready)
	o.set("a", endpoint.Idle)
	o.check(t, "a lost", "", "idle")
	before := o.Carry(nil)
	if before == nil || !before.Idle {
		t.Fatalf("Carry of an idle leaf: %+v, want Idle", before)
	}
	o.Leaf = &Leaf{Policy: o.Policy, Localities: o.Localities, Before: before, Clock: o.clk, Repick: o.Repick}
	o.update()
	o.check(t, "updated while idle", "", "idle")
	o.ExitIdle()
	o.update()
	o.check(t, "asked", "a", "")
}

// The chosen endpoint going from READY to CONNECTING or TRANSIENT_FAILURE,
// which only an endpoint of several connections does (gRFC A105: its last
// ready connection lost while another is being made, or during the
// backoff of one that failed), starts a new pass at once, from the first
// endpoint (A105: "If the selected (READY) subchannel transitions to
// CONNECTING or TRANSIENT_FAILURE state, then pick_first will go back into
// CONNECTING state. It will start the happy eyeballs pass across all
// subchannels"); going IDLE, it waits for a request (A62).
func TestPickFirstChosenConnectingOrFailingStartsNewPass(t *testing.T) {
	for _, s := range []endpoint.State{endpoint.Connecting, endpoint.TransientFailure} {
		t.Run(s.String(), func(t *testing.T) {
			o := newPFOwner(3)
			o.set("a", endpoint.Connecting)
			o.set("a", endpoint.TransientFailure)
			o.set("b", endpoint.Ready)
			o.check(t, "b ready", "b", "b")
			o.set("b", s)
			if o.Idle() {
				t.Errorf("b %v: the leaf is Idle, want it connecting", s)
			}
			// a, failing still, is passed over at once; b is started.
			want := "ab"
			if s == endpoint.TransientFailure {
				want = "abc" // b failed too: c's turn at once
			}
			o.check(t, "b "+s.String(), want, "")
			o.set("b", endpoint.Ready)
			o.check(t, "b ready again", "b", "b")
		})
	}
}
