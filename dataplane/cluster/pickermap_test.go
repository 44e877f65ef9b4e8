package cluster

import (
	"fmt"
	"testing"
)

func TestPickerMap(t *testing.T) {
	t.Parallel()
	clusters := make(map[string]*Cluster)
	for i := range 1000 {
		cl := newCluster(fmt.Sprint("c", i))
		clusters[cl.name] = cl
	}
	m := newPickerMap(clusters)
	if m.Len() != 1000 || m.Get("c7") == nil || m.Get("nope") != nil || !m.balanced(1000) {
		t.Fatalf("newPickerMap: len %d, c7 %v, nope %v", m.Len(), m.Get("c7"), m.Get("nope"))
	}
	p := errPicker{fmt.Errorf("x")}
	m2 := m.with(map[string]Picker{"c7": p, "c8": nil, "new": p})
	if m2.Len() != 1000 || m2.Get("c7") != p || m2.Get("c8") != nil || m2.Get("new") != p {
		t.Errorf("with: len %d, c7 %v, c8 %v, new %v", m2.Len(), m2.Get("c7"), m2.Get("c8"), m2.Get("new"))
	}
	if m.Len() != 1000 || m.Get("c7") == p || m.Get("c8") == nil || m.Get("new") != nil {
		t.Error("with changed the map it was called on")
	}
	if z := (PickerMap{}).with(map[string]Picker{"a": p}); z.Len() != 1 || z.Get("a") != p {
		t.Errorf("with on the zero map: len %d, a %v", z.Len(), z.Get("a"))
	}
	if m.balanced(100_000) || m.balanced(10) {
		t.Error("a map of 1000 pickers suits 10 or 100,000")
	}
}
