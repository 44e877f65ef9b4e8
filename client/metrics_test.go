package client

import (
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
)

type metricEvent struct {
	kind, server, typeURL string
	valid, invalid        int
	connected             bool
}

type recordingMetrics struct {
	mu     sync.Mutex
	events []metricEvent
}

func (m *recordingMetrics) add(e metricEvent) {
	m.mu.Lock()
	m.events = append(m.events, e)
	m.mu.Unlock()
}

func (m *recordingMetrics) ResourceUpdates(server, typeURL string, valid, invalid int) {
	m.add(metricEvent{kind: "updates", server: server, typeURL: typeURL, valid: valid, invalid: invalid})
}
func (m *recordingMetrics) ServerFailure(server string) {
	m.add(metricEvent{kind: "failure", server: server})
}
func (m *recordingMetrics) Connected(server string, c bool) {
	m.add(metricEvent{kind: "connected", server: server, connected: c})
}

func (m *recordingMetrics) take() []metricEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.events
	m.events = nil
	return out
}

func TestMetrics(t *testing.T) {
	m := &recordingMetrics{}
	h := newHarness(t, nil, Options{Metrics: m})
	srv := "xds.example.com:443"
	h.watchAll(wholeWorldType, "L1", "L2", "L3")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a"), lis("L2", "invalid")); err == nil {
		t.Fatal("want NACK")
	}
	want := []metricEvent{
		{kind: "connected", server: srv, connected: true},
		{kind: "updates", server: srv, typeURL: resources.ListenerTypeURL, valid: 1, invalid: 1},
	}
	if got := m.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("metrics %+v, want %+v", got, want)
	}
	// Unchanged resources count as valid updates again (A78).
	if err := h.sotw(resources.ListenerTypeURL, "2", lis("L1", "a"), lis("L2", "b")); err != nil {
		t.Fatal(err)
	}
	want = []metricEvent{{kind: "updates", server: srv, typeURL: resources.ListenerTypeURL, valid: 2}}
	if got := m.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("metrics %+v, want %+v", got, want)
	}
	// A healthy stream ending is not a failure; a failed reconnect is, once.
	h.transport().fail(errors.New("reset"))
	h.transport().fail(errors.New("refused"))
	h.transport().fail(errors.New("refused"))
	want = []metricEvent{{kind: "failure", server: srv}, {kind: "connected", server: srv, connected: false}}
	if got := m.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("metrics %+v, want %+v", got, want)
	}
	counts := h.c.ResourceCounts()
	wantCounts := []ResourceCount{
		{Authority: "#old", TypeURL: resources.ListenerTypeURL, CacheState: "acked", Count: 2},
		{Authority: "#old", TypeURL: resources.ListenerTypeURL, CacheState: "requested", Count: 1},
	}
	if !reflect.DeepEqual(counts, wantCounts) {
		t.Fatalf("resource counts %+v, want %+v", counts, wantCounts)
	}
}

func TestResourceCountsStates(t *testing.T) {
	cfg := testBootstrap()
	cfg.Authorities = map[string]bootstrap.Authority{"a.example": {}}
	h := newHarness(t, cfg, Options{})
	h.watchAll(wholeWorldType, "L1", "L2", "L3", "xdstp://a.example/envoy.config.listener.v3.Listener/L4")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a"), lis("L2", "a")); err != nil {
		t.Fatal(err)
	}
	h.sotw(resources.ListenerTypeURL, "2", lis("L1", "invalid"), lis("L2", "a"), lis("L3", "invalid"))
	got := map[string]int{}
	for _, rc := range h.c.ResourceCounts() {
		got[rc.Authority+"/"+rc.CacheState] += rc.Count
	}
	want := map[string]int{"#old/nacked_but_cached": 1, "#old/acked": 1, "#old/nacked": 1, "a.example/requested": 1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}
