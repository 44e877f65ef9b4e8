package endpoint

import (
	"errors"
	"slices"
	"testing"
)

// fakeConn records what the pool asks of it.
type fakeConn struct {
	name               string
	connects, shutdown int
}

func (c *fakeConn) Connect()  { c.connects++ }
func (c *fakeConn) Shutdown() { c.shutdown++ }

// fakeDialer makes fakeConns, or fails with err.
type fakeDialer struct {
	made    []*fakeConn
	dropped []*Endpoint
	err     error
}

func (d *fakeDialer) NewConn(ep *Endpoint) (Conn, error) {
	if d.err != nil {
		return nil, d.err
	}
	c := &fakeConn{name: ep.Key()}
	d.made = append(d.made, c)
	return c, nil
}

func (d *fakeDialer) Dropped(ep *Endpoint) { d.dropped = append(d.dropped, ep) }

// user counts the changes it is told of.
type user struct {
	name    string
	changes int
}

// told is the pools' changed: it counts the change on the user.
func told(u User, _ *Endpoint) { u.(*user).changes++ }

// Endpoints are shared by key: the same addresses and extra part give the
// same endpoint, created once.
func TestPoolSharesEndpointsByKey(t *testing.T) {
	p := NewPool(&fakeDialer{}, told)
	a, isNew := p.Get([]string{"10.0.0.1:80", "[::1]:80"}, "")
	if !isNew || a.Key() != "10.0.0.1:80,[::1]:80" || a.State() != Idle || a.Conn() != nil {
		t.Fatalf("new endpoint: new %v, key %q, state %v, conn %v", isNew, a.Key(), a.State(), a.Conn())
	}
	if again, isNew := p.Get([]string{"10.0.0.1:80", "[::1]:80"}, ""); again != a || isNew {
		t.Errorf("same addresses again: %p (new %v), want %p", again, isNew, a)
	}
	tls, isNew := p.Get([]string{"10.0.0.1:80", "[::1]:80"}, "sec|host")
	if tls == a || !isNew || tls.Key() != "10.0.0.1:80,[::1]:80|sec|host" {
		t.Errorf("same addresses, other security: %q (new %v), want an endpoint of its own", tls.Key(), isNew)
	}
	if p.Len() != 2 || p.Lookup(a.Key()) != a || p.Lookup("10.0.0.2:80") != nil {
		t.Errorf("pool of %d; Lookup finds %p and %p", p.Len(), p.Lookup(a.Key()), p.Lookup("10.0.0.2:80"))
	}
}

// The first Want makes the connection and connects it; later ones connect
// it only while it is idle; Unwant keeps it.
func TestWantConnects(t *testing.T) {
	d := &fakeDialer{}
	p := NewPool(d, told)
	ep, _ := p.Get([]string{"a"}, "")
	p.Want(ep)
	if len(d.made) != 1 || d.made[0].connects != 1 || ep.Wanted() != 1 {
		t.Fatalf("first Want: %d conns made, wanted %d", len(d.made), ep.Wanted())
	}
	c := d.made[0]
	p.SetState(ep, c, Connecting, nil)
	p.Want(ep)
	if len(d.made) != 1 || c.connects != 1 || ep.Wanted() != 2 {
		t.Errorf("second Want while connecting: %d conns made, %d connects; want 1, 1", len(d.made), c.connects)
	}
	p.Unwant(ep)
	p.Unwant(ep)
	if ep.Wanted() != 0 || ep.Conn() != c || c.shutdown != 0 {
		t.Errorf("unwanted: wanted %d, conn kept %v, shut down %d times", ep.Wanted(), ep.Conn() == c, c.shutdown)
	}
}

// A connection gone idle is connected again while the endpoint is
// wanted, not after; and not before its users chose again what they want
// (Reconnect): one that no longer wants it is never made to connect it.
func TestIdleWhileWantedReconnects(t *testing.T) {
	d := &fakeDialer{}
	p := NewPool(d, told)
	ep, _ := p.Get([]string{"a"}, "")
	p.Want(ep)
	c := d.made[0]
	p.SetState(ep, c, Ready, nil)
	p.SetState(ep, c, Idle, nil)
	if c.connects != 1 || ep.State() != Idle {
		t.Errorf("idle while wanted, before Reconnect: %d connects, state %v; want 1, IDLE", c.connects, ep.State())
	}
	p.Reconnect()
	if c.connects != 2 {
		t.Errorf("idle while wanted, after Reconnect: %d connects, want 2", c.connects)
	}
	p.Reconnect()
	if c.connects != 2 {
		t.Errorf("a second Reconnect: %d connects, want still 2", c.connects)
	}
	// Lost, then let go by its user before Reconnect (pick_first gone
	// idle): not connected.
	p.SetState(ep, c, Idle, nil)
	p.Unwant(ep)
	p.Reconnect()
	if c.connects != 2 {
		t.Errorf("idle, then unwanted before Reconnect: %d connects, want still 2", c.connects)
	}
	p.Want(ep)
	if c.connects != 3 {
		t.Errorf("wanted again while idle: %d connects, want 3", c.connects)
	}
	// Connecting again before Reconnect (another cause connected it):
	// not connected twice.
	p.SetState(ep, c, Idle, nil)
	p.SetState(ep, c, Connecting, nil)
	p.Reconnect()
	if c.connects != 3 {
		t.Errorf("idle then connecting before Reconnect: %d connects, want still 3", c.connects)
	}
	p.AddUser(ep, &user{})
	p.ExitIdle()
	if c.connects != 3 {
		t.Errorf("ExitIdle with the connection connecting: %d connects, want still 3", c.connects)
	}
	p.SetState(ep, c, Idle, nil)
	p.ExitIdle()
	if c.connects != 4 {
		t.Errorf("ExitIdle with the connection idle and wanted: %d connects, want 4", c.connects)
	}
}

// TRANSIENT_FAILURE sticks through the transport's retries until READY,
// and users hear of each change, not of each report.
func TestTransientFailureSticks(t *testing.T) {
	d := &fakeDialer{}
	p := NewPool(d, told)
	ep, _ := p.Get([]string{"a"}, "")
	u := &user{}
	p.AddUser(ep, u)
	p.Want(ep)
	c := d.made[0]
	refused := errors.New("refused")
	for _, step := range []struct {
		s       State
		err     error
		want    State
		wantErr error
		changes int
	}{
		{Connecting, nil, Connecting, nil, 1},
		{Connecting, nil, Connecting, nil, 1},
		{TransientFailure, refused, TransientFailure, refused, 2},
		{Connecting, nil, TransientFailure, refused, 2},
		{Idle, nil, TransientFailure, refused, 2},
		{Ready, nil, Ready, nil, 3},
		{Idle, nil, Idle, nil, 4},
	} {
		if !p.SetState(ep, c, step.s, step.err) {
			t.Fatalf("report of %v from the endpoint's connection ignored", step.s)
		}
		if ep.State() != step.want || ep.Err() != step.wantErr || u.changes != step.changes {
			t.Fatalf("after %v: state %v, err %v, %d changes told; want %v, %v, %d",
				step.s, ep.State(), ep.Err(), u.changes, step.want, step.wantErr, step.changes)
		}
		if ep.Usable() != (step.want != TransientFailure) {
			t.Errorf("after %v: usable %v", step.s, ep.Usable())
		}
	}
}

// A dialer's error fails the endpoint with it, and its users hear of it.
func TestNewConnErrorFailsEndpoint(t *testing.T) {
	noProxy := errors.New("no dialer for the proxy")
	p := NewPool(&fakeDialer{err: noProxy}, told)
	ep, _ := p.Get([]string{"a"}, "")
	u := &user{}
	p.AddUser(ep, u)
	p.Want(ep)
	if ep.State() != TransientFailure || ep.Err() != noProxy || ep.Conn() != nil || u.changes != 1 || ep.Ready() {
		t.Errorf("dialer failed: state %v, err %v, conn %v, %d changes told", ep.State(), ep.Err(), ep.Conn(), u.changes)
	}
}

// Release shuts the connection down but keeps the endpoint; the old
// connection's reports are ignored, and the next Want makes a new one.
func TestReleaseKeepsEndpoint(t *testing.T) {
	d := &fakeDialer{}
	p := NewPool(d, told)
	ep, _ := p.Get([]string{"a"}, "")
	u := &user{}
	p.AddUser(ep, u)
	p.Want(ep)
	old := d.made[0]
	p.SetState(ep, old, Ready, nil)
	p.Unwant(ep)
	p.Release(ep)
	if old.shutdown != 1 || ep.Conn() != nil || ep.State() != Idle || u.changes != 2 || p.Lookup("a") != ep {
		t.Fatalf("released: shut down %d, conn %v, state %v, %d changes told", old.shutdown, ep.Conn(), ep.State(), u.changes)
	}
	if p.SetState(ep, old, Ready, nil) || ep.State() != Idle {
		t.Errorf("a released connection's report was taken: state %v", ep.State())
	}
	if p.SetState(ep, nil, Ready, nil) || ep.State() != Idle {
		t.Errorf("a report of no connection was taken for an endpoint with none: state %v", ep.State())
	}
	p.Want(ep)
	if len(d.made) != 2 || ep.Conn() != d.made[1] {
		t.Errorf("wanted after release: %d conns made, want a second", len(d.made))
	}
}

// Prune drops the endpoints that lost their last user and were not taken
// again, and only those: their connections are shut down and the dialer
// told.
func TestPruneDropsOrphans(t *testing.T) {
	d := &fakeDialer{}
	p := NewPool(d, told)
	u1, u2 := &user{name: "1"}, &user{name: "2"}
	a, _ := p.Get([]string{"a"}, "")
	b, _ := p.Get([]string{"b"}, "")
	c, _ := p.Get([]string{"c"}, "")
	for _, ep := range []*Endpoint{a, b, c} {
		p.AddUser(ep, u1)
		p.Want(ep)
	}
	p.AddUser(c, u2)
	p.RemoveUser(a, u1) // orphan
	p.RemoveUser(b, u1) // orphan, taken again before Prune
	p.AddUser(b, u2)
	p.RemoveUser(c, u1) // u2 still lists it
	p.Prune()
	if p.Lookup("a") != nil || p.Lookup("b") != b || p.Lookup("c") != c || p.Len() != 2 {
		t.Fatalf("after Prune: a %p, b %p, c %p, %d endpoints; want a alone dropped", p.Lookup("a"), p.Lookup("b"), p.Lookup("c"), p.Len())
	}
	if d.made[0].shutdown != 1 || d.made[1].shutdown != 0 || !slices.Equal(d.dropped, []*Endpoint{a}) {
		t.Errorf("a shut down %d times, b %d; dropped %v", d.made[0].shutdown, d.made[1].shutdown, d.dropped)
	}
	if p.SetState(a, d.made[0], Ready, nil) || a.Ready() {
		t.Error("a dropped endpoint's connection report was taken")
	}
	p.Want(a) // a user holding a dropped endpoint: no connection
	if len(d.made) != 3 {
		t.Errorf("Want of a dropped endpoint made a connection")
	}
	// A new Get of a's addresses makes a new endpoint.
	if again, isNew := p.Get([]string{"a"}, ""); again == a || !isNew {
		t.Error("Get after a was dropped returned it")
	}
	p.Close()
	if p.Len() != 0 || d.made[1].shutdown != 1 || d.made[2].shutdown != 1 || len(d.dropped) != 4 {
		t.Errorf("after Close: %d endpoints, b shut down %d times, c %d, %d dropped", p.Len(), d.made[1].shutdown, d.made[2].shutdown, len(d.dropped))
	}
}

// An endpoint's users are one until a second lists it; removing the
// first promotes another, so that the set is empty only when no user is
// left.
func TestUserSet(t *testing.T) {
	a, b, c := &user{name: "a"}, &user{name: "b"}, &user{name: "c"}
	var s userSet
	names := func() []string {
		var out []string
		s.each(func(u User) { out = append(out, u.(*user).name) })
		slices.Sort(out)
		return out
	}
	s.add(a)
	s.add(a)
	if s.len() != 1 || s.more != nil {
		t.Fatalf("one user added twice: len %d, map %v; want 1 and no map", s.len(), s.more)
	}
	s.add(b)
	s.add(c)
	if got := names(); s.len() != 3 || !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("three users: len %d, %q", s.len(), got)
	}
	s.remove(a)
	if got := names(); s.len() != 2 || !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("the first removed: len %d, %q; want b and c", s.len(), got)
	}
	s.remove(a) // not there: nothing happens
	s.remove(b)
	s.remove(c)
	if s.len() != 0 || len(names()) != 0 {
		t.Fatalf("all removed: len %d, %q", s.len(), names())
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Idle: "IDLE", Connecting: "CONNECTING", Ready: "READY", TransientFailure: "TRANSIENT_FAILURE", 9: "State(9)"} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", s, got, want)
		}
	}
}
