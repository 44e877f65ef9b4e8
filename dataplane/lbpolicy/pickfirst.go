package lbpolicy

import (
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
)

// Clock is what the policies need of time: pick_first's Happy Eyeballs
// turns. Tests replace it.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer a Clock started.
type Timer interface{ Stop() bool }

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// HappyEyeballsDelay is how long pick_first waits for an endpoint still
// connecting before it lets the next one in the list be chosen as well
// (gRFC A61's Happy Eyeballs, as gRPC's pick_first does).
const HappyEyeballsDelay = 250 * time.Millisecond

// clock returns the clock of l's timers.
func (l *Leaf) clock() Clock {
	if l.Clock != nil {
		return l.Clock
	}
	return realClock{}
}

// pickFirst returns the picker sending every request to g's chosen
// endpoint, nil while it waits for one. The chosen one stays while it is
// ready (so does one chosen before this configuration, in PickedBefore):
// gRFC A62's pick_first keeps the connection it has. Else the endpoints
// are tried in order, as gRPC tries them: a failing one is passed over,
// the first ready one is chosen, and one still connecting is waited for,
// but each 250ms of waiting lets one more endpoint of the list in (Happy
// Eyeballs).
//
// The owner connects every endpoint at once (it wants them all); this
// only orders the choice. gRFC A62's one address at a time is the
// follow-up: the leaf would then say which endpoints to want, the first
// not failing and one more per turn, where today the cluster wants every
// endpoint of the priority.
func (l *Leaf) pickFirst(g *group) Picker {
	if g.chosen != nil && !l.ready(g.chosen) {
		g.chosen = nil
	}
	for _, e := range g.eps {
		if g.chosen == nil && l.PickedBefore[e.ep] && l.ready(e.ep) {
			g.chosen = e.ep
		}
	}
	now := l.clock().Now()
	turns := 1
	if !g.waitStart.IsZero() {
		turns += int(now.Sub(g.waitStart) / HappyEyeballsDelay)
	}
	waiting, more := false, false
	for _, e := range g.eps {
		if g.chosen != nil || e.ep.State() == endpoint.TransientFailure || l.ejected(e.ep) {
			continue
		}
		if turns == 0 {
			more = true
			break
		}
		if l.ready(e.ep) {
			g.chosen = e.ep
			break
		}
		waiting = true
		turns--
	}
	if g.chosen != nil {
		g.waitStart = time.Time{}
		return onePicker{Picked{Endpoint: g.chosen, Conn: g.chosen.Conn()}}
	}
	if waiting && g.waitStart.IsZero() {
		g.waitStart = now
	}
	if more && g.waitTimer == nil && l.Repick != nil {
		next := HappyEyeballsDelay - now.Sub(g.waitStart)%HappyEyeballsDelay
		repick := l.Repick
		g.waitTimer = l.clock().AfterFunc(next, func() { repick(func() { g.waitTimer = nil }) })
	}
	return nil
}

// onePicker sends every request to one endpoint.
type onePicker struct{ p Picked }

func (p onePicker) Pick(uint64) (Picked, error) { return p.p, nil }
