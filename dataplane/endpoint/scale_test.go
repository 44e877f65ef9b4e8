package endpoint

import (
	"slices"
	"testing"
)

// scalingDialer is a fakeDialer that hears of MaxConns changes.
type scalingDialer struct {
	fakeDialer
	changed []uint32 // each endpoint's MaxConns when told
}

func (d *scalingDialer) MaxConnsChanged(ep *Endpoint) { d.changed = append(d.changed, ep.MaxConns()) }

// An endpoint takes the largest setting of its users; a user that stops
// scaling it, or stops listing it, gives its setting back, and the dialer
// hears of each change of the result, and only of changes.
func TestMaxConnsOfUsers(t *testing.T) {
	d := &scalingDialer{}
	p := NewPool(d, told)
	ep, _ := p.Get([]string{"a"}, "")
	a, b := &user{name: "a"}, &user{name: "b"}
	p.AddUser(ep, a)
	p.AddUser(ep, b)
	if ep.MaxConns() != 1 {
		t.Fatalf("unscaled endpoint: MaxConns %d, want 1", ep.MaxConns())
	}
	p.SetMaxConns(ep, a, 1) // 1 is no scaling: nothing to record
	if ep.scale != nil || len(d.changed) != 0 {
		t.Fatalf("a setting of 1 kept %v, told %v", ep.scale, d.changed)
	}
	steps := []struct {
		do   func()
		want uint32
	}{
		{func() { p.SetMaxConns(ep, a, 3) }, 3},
		{func() { p.SetMaxConns(ep, b, 2) }, 3},
		{func() { p.SetMaxConns(ep, b, 5) }, 5},
		{func() { p.SetMaxConns(ep, b, 0) }, 3}, // b lowers: a's again
		{func() { p.SetMaxConns(ep, b, 4) }, 4},
		{func() { p.RemoveUser(ep, b) }, 3}, // b leaves
		{func() { p.SetMaxConns(ep, a, 1) }, 1},
	}
	for i, s := range steps {
		s.do()
		if ep.MaxConns() != s.want {
			t.Errorf("step %d: MaxConns %d, want %d", i, ep.MaxConns(), s.want)
		}
	}
	if want := []uint32{3, 5, 3, 4, 3, 1}; !slices.Equal(d.changed, want) {
		t.Errorf("dialer told of %v, want %v", d.changed, want)
	}
	if ep.scale != nil {
		t.Errorf("no user scales the endpoint, yet it keeps %+v", ep.scale)
	}
	// A dialer that does not scale is not asked to.
	p2 := NewPool(&fakeDialer{}, told)
	ep2, _ := p2.Get([]string{"a"}, "")
	p2.SetMaxConns(ep2, a, 2)
	if ep2.MaxConns() != 2 {
		t.Errorf("MaxConns %d with a plain dialer, want 2", ep2.MaxConns())
	}
}
