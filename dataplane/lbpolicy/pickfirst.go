package lbpolicy

import (
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
)

// Clock is what the policies need of time: pick_first's Happy Eyeballs
// turns. Tests replace it.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer a Clock started.
type Timer interface{ Stop() bool }

// RealClock is time's Clock: the data plane's packages and adapters run
// on it unless their tests give another.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// HappyEyeballsDelay is how long pick_first waits for the endpoint it is
// connecting before it starts connecting the next one in the list as well
// (gRFC A61's Happy Eyeballs, as gRPC's pick_first does).
const HappyEyeballsDelay = 250 * time.Millisecond

// clock returns the clock of l's timers.
func (l *Leaf) clock() Clock {
	if l.Clock != nil {
		return l.Clock
	}
	return RealClock{}
}

// Want adds to wanted the endpoints the leaf wants connected now, for its
// owner to want in the pool: every endpoint, but under pick_first only
// those it is trying (gRFC A62: one at a time, in order), or the one it
// chose. The owner asks each time it asks for a picker, and before it:
// for pick_first this is where the pass over the list moves on. (A map
// to fill, not an iterator: the owner asks for every cluster at each
// state change, and an iterator's closure is an allocation each time.)
func (l *Leaf) Want(wanted map[*endpoint.Endpoint]struct{}) {
	if l.Policy.Kind != resources.LBPickFirst {
		for _, loc := range l.Localities {
			for _, e := range loc.Endpoints {
				wanted[e.Endpoint] = struct{}{}
			}
		}
		return
	}
	for _, g := range l.endpointGroups() {
		l.pickFirstStep(g)
		if g.idle {
			continue // nothing until a request asks (ExitIdle)
		}
		if g.chosen != nil {
			wanted[g.chosen] = struct{}{}
			continue
		}
		for _, e := range g.eps[:g.tried] {
			wanted[e.ep] = struct{}{}
		}
	}
}

// pickFirst returns the picker sending every request to g's chosen
// endpoint, idlePicker while g is idle, nil while it has none.
func (l *Leaf) pickFirst(g *group) Picker {
	l.pickFirstStep(g)
	if g.idle {
		return idlePicker{}
	}
	if g.chosen == nil {
		return nil
	}
	return onePicker{Picked{Endpoint: g.chosen, Conn: g.chosen.Conn()}}
}

// pickFirstStep moves g's pass over its endpoints on from their states as
// they are now, as gRFC A62's pick_first moves on from its subchannels'
// reports. It is a function of those states and the time, so that the
// owner may call it as often as it likes:
//   - the chosen endpoint stays while it is ready (so does one chosen
//     before this configuration, in Before, if still ready; with none,
//     a leaf idle before this configuration starts idle);
//   - otherwise the endpoints are started in order, the first at once,
//     each next one when the last one started fails (or is ejected), or
//     when it has been connecting for HappyEyeballsDelay while the ones
//     before it keep trying;
//   - the first ready endpoint of those started is chosen, and the others
//     are no longer wanted;
//   - once every endpoint is started, all stay wanted, and the pool
//     connects each again after its backoff, until one is ready (the
//     owner sees every one failing: TRANSIENT_FAILURE, sticky, A62);
//   - the chosen endpoint losing its connection makes g idle: it wants
//     nothing, and its picker asks for a new pass (ExitIdle), from the
//     first endpoint, when a request comes (gRFC A62; gRPC's pick_first
//     goes IDLE and its picker calls ExitIdle). The chosen endpoint
//     ejected by outlier detection, or going from ready to connecting or
//     failing (gRFC A105's endpoint of several connections), starts a new
//     pass at once.
func (l *Leaf) pickFirstStep(g *group) {
	if g.idle {
		return
	}
	if g.chosen != nil {
		if l.ready(g.chosen) {
			g.stopTimer()
			return
		}
		// Lost (its connection idle): idle until asked. CONNECTING or
		// TRANSIENT_FAILURE straight from READY, which only an endpoint of
		// several connections goes to (gRFC A105: its last ready one lost
		// while another is being made, or in the backoff of one that
		// failed), or ejected: a new pass at once.
		lost := !l.ejected(g.chosen) && g.chosen.Reported() == endpoint.Idle
		g.chosen, g.tried = nil, 0
		if lost {
			g.idle = true
			g.stopTimer()
			return
		}
	}
	if !g.began {
		g.began = true
		for _, e := range g.eps {
			if l.Before != nil && l.Before.Picked[e.ep] && l.ready(e.ep) {
				g.chosen = e.ep
				return
			}
		}
		if l.Before != nil && l.Before.Idle {
			g.idle = true
			return
		}
	}
	now := l.clock().Now()
	for i, e := range g.eps {
		if i == g.tried {
			switch {
			case i == 0 || l.failed(g.eps[i-1].ep):
				g.lastStart = now
			case now.Sub(g.lastStart) >= HappyEyeballsDelay:
				// The turn of the one before ended at lastStart+delay:
				// this one's starts then, whenever the owner asks.
				g.lastStart = g.lastStart.Add(HappyEyeballsDelay)
			default:
				l.armTurn(g, now)
				return
			}
			g.tried++
		}
		if l.ready(e.ep) {
			g.chosen = e.ep
			g.stopTimer()
			return
		}
	}
	g.stopTimer() // every endpoint started: no more turns
}

// failed reports whether pick_first moves on from ep at once: its
// connection failed and has not tried again since (it reported
// TRANSIENT_FAILURE last: failing now, or waiting out its backoff), or
// outlier detection ejected it. The endpoint's sticky state is not what
// counts: one that failed in an earlier pass and whose connection is idle
// again gets its turn, as gRPC's pick_first connects a SubConn that is
// idle and passes over one in TRANSIENT_FAILURE.
func (l *Leaf) failed(ep *endpoint.Endpoint) bool {
	return ep.Reported() == endpoint.TransientFailure || l.ejected(ep)
}

// Idle reports whether the leaf waits for a request to connect anything:
// under pick_first, a group lost its chosen endpoint's connection and no
// other group has an endpoint ready or one that may yet be. Its picker
// then answers ErrIdle until the owner calls ExitIdle.
func (l *Leaf) Idle() bool {
	if l.Policy.Kind != resources.LBPickFirst {
		return false
	}
	idle := false
	for _, g := range l.groups {
		if g.idle {
			idle = true
			continue
		}
		for _, e := range g.eps {
			if e.ep.Usable() && !l.ejected(e.ep) {
				return false
			}
		}
	}
	return idle
}

// ExitIdle starts a new pass over the endpoints of each idle group, from
// the first (gRFC A62), and reports whether there was one: the owner
// then asks again for what the leaf wants (Want), and for its picker. It
// calls ExitIdle when a request met ErrIdle, and when the transport asks
// every policy to leave idle (gRPC's ExitIdle).
func (l *Leaf) ExitIdle() bool {
	woke := false
	for _, g := range l.groups {
		if g.idle {
			g.idle, g.tried, woke = false, 0, true
		}
	}
	return woke
}

// armTurn sets g's timer for the end of the turn that began at
// g.lastStart, unless set for it already: it has the owner ask again
// (Repick), and the next endpoint is started then.
func (l *Leaf) armTurn(g *group, now time.Time) {
	if l.Repick == nil || (g.timer != nil && g.timerFor.Equal(g.lastStart)) {
		return
	}
	g.stopTimer()
	repick := l.Repick
	var self Timer
	self = l.clock().AfterFunc(HappyEyeballsDelay-now.Sub(g.lastStart), func() {
		repick(func() {
			if g.timer == self { // not stopped and replaced meanwhile
				g.timer = nil
			}
		})
	})
	g.timer, g.timerFor = self, g.lastStart
}

// stopTimer stops g's Happy Eyeballs timer, if it runs.
func (g *group) stopTimer() {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
}

// idlePicker is the picker of a pick_first group gone idle: every request
// meets ErrIdle, for the owner to call ExitIdle and hold it. (The owner
// acts, not the picker: a pick cannot take the owner's lock.)
type idlePicker struct{}

func (idlePicker) Pick(uint64) (Picked, error) { return Picked{}, ErrIdle }

// onePicker sends every request to one endpoint.
type onePicker struct{ p Picked }

func (p onePicker) Pick(uint64) (Picked, error) { return p.p, nil }
