package client

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// lastSeen is a watcher that remembers only what it was told last.
type lastSeen struct {
	mu       sync.Mutex
	value    *testValue // last update
	lastKind string
	canceled bool
}

func (l *lastSeen) Update(v *testValue) {
	l.mu.Lock()
	l.value, l.lastKind = v, "update"
	l.mu.Unlock()
}

func (l *lastSeen) ResourceError(error) {
	l.mu.Lock()
	l.lastKind = "resource-error"
	l.mu.Unlock()
}

func (l *lastSeen) AmbientError(error) {}

// fuzzWatch is one open watch of the fuzz driver.
type fuzzWatch struct {
	typeURL, name string
	key           string // name with its dynamic parameters (transport.SubscriptionKey)
	w             *lastSeen
	cancel        func()
}

// FuzzResponseHandling drives a client with random operations: watches,
// cancels, SotW and delta responses of valid, invalid, garbage, duplicate,
// wrapped and heartbeat resources, removals, stream errors, requests sent.
// The client must never panic or hang, and after every step every open
// watch must agree with the cache: a watcher whose resource has a value saw
// that very value last; one whose resource was lost was told so.
func FuzzResponseHandling(f *testing.F) {
	f.Add([]byte{0, 0, 3, 2, 0, 1, 3, 1, 2, 6, 3, 0})
	f.Add([]byte{1, 1, 4, 3, 1, 2, 3, 5, 1, 2, 1, 3, 7, 6, 6})
	f.Add([]byte{8, 0, 0, 3, 3, 0, 1, 2, 3, 3, 2, 2, 2, 2, 0})
	f.Add([]byte{0, 1, 5, 0, 2, 1, 4, 5, 0, 0, 3, 2, 9, 0, 5, 0, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		// A stalled input cannot fail by itself: the test goroutine is
		// the one stuck. Crash the process instead, naming the input.
		stop := watchInput(realClock{}, ops, fuzzInputDeadline, func(msg string) { panic(msg) })
		defer stop()
		runFuzzOps(t, ops)
	})
}

// maxFuzzInput bounds how much of an input FuzzResponseHandling reads.
// Go's fuzzer minimises every input that finds new coverage, for up to
// -fuzzminimizetime (a minute) and without reporting execs meanwhile; its
// search is cubic in the input's length, and each run of ours builds a
// client. Inputs grew to hundreds of bytes, so the worker spent whole minutes
// minimising: the "stall" at 0 execs/s. Bytes past the bound change no
// coverage, so the minimiser cuts them off first, in a few runs; 128 bytes
// are some 20 to 40 operations.
const maxFuzzInput = 128

// fuzzInputDeadline bounds one input's run. A run takes milliseconds; every
// wait of the harness has its own deadline (testTimeout), but a call into the
// client (Watch, cancel, a transport callback) that never returns has none.
const fuzzInputDeadline = 30 * time.Second

// watchInput calls stalled with a report naming input and holding every
// goroutine's stack if the returned stop is not called within d.
func watchInput(clock Clock, input []byte, d time.Duration, stalled func(string)) (stop func()) {
	input = append([]byte(nil), input...) // the fuzzer reuses its buffer
	timer := clock.AfterFunc(d, func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		stalled(fmt.Sprintf("input %q has not finished after %v; goroutines:\n%s", input, d, buf))
	})
	return func() { timer.Stop() }
}

// runFuzzOps runs one input of FuzzResponseHandling, as a bytecode: each
// operation takes its kind and arguments from the next bytes. Only the first
// maxFuzzInput bytes are read; it returns how many were.
func runFuzzOps(t *testing.T, ops []byte) (consumed int) {
	if len(ops) > maxFuzzInput {
		ops = ops[:maxFuzzInput]
	}
	h := newHarness(t, nil, Options{WatchExpiry: time.Hour})
	var watches []*fuzzWatch
	version := 0
	next := func() byte {
		if len(ops) == 0 {
			return 0
		}
		b := ops[0]
		ops = ops[1:]
		consumed++
		return b
	}
	pick := func(kinds ...string) string { return kinds[int(next())%len(kinds)] }
	resource := func(typeURL string, wrap bool) *anypb.Any {
		name := pick("A", "B", "C")
		payload := pick("1", "2", "invalid")
		var body *anypb.Any
		switch next() % 8 {
		case 0:
			return &anypb.Any{TypeUrl: typeURL, Value: []byte{0xff, next()}} // garbage
		case 1:
			if typeURL == resources.ListenerTypeURL {
				body = rc(name, payload) // a body of the other type
			} else {
				body = lis(name, payload)
			}
		default:
			if typeURL == resources.ListenerTypeURL {
				body = lis(name, payload)
			} else {
				body = rc(name, payload)
			}
		}
		if !wrap && next()%3 != 0 {
			return body
		}
		r := wrapped(name, fmt.Sprint(version), time.Duration(next()%2)*time.Hour, body)
		if v := int(next() % 8); v < len(fuzzConstraints) {
			// A variant, named by resource_name.
			r.Name, r.ResourceName = "", &discoveryv3.ResourceName{Name: name, DynamicParameterConstraints: fuzzConstraints[v]}
		}
		if next()%5 == 0 {
			r.Resource = nil // heartbeat
		}
		return mustAny(r)
	}
	for len(ops) > 0 {
		typ, typeURL := wholeWorldType, resources.ListenerTypeURL
		if next()%2 == 1 {
			typ, typeURL = partialType, resources.RouteConfigTypeURL
		}
		op := next() % 10
		if op >= 3 && !h.hasTransport() {
			continue // nothing was watched yet: there is no stream to speak on
		}
		switch op {
		case 0, 1: // watch
			name := pick("A", "B", "C", "*")
			if name == "*" && typ == partialType {
				name = "A"
			}
			params := fuzzParams[int(next())%len(fuzzParams)]
			if name == "*" {
				params = nil
			}
			fw := &fuzzWatch{typeURL: typeURL, name: name, key: transport.SubscriptionKey(name, params), w: &lastSeen{}}
			fw.cancel = WatchWithOptions(h.c, typ, name, WatchOptions{DynamicParameters: params}, fw.w)
			watches = append(watches, fw)
		case 2: // cancel
			if len(watches) > 0 {
				i := int(next()) % len(watches)
				watches[i].cancel()
				watches[i].w.mu.Lock()
				watches[i].w.canceled = true
				watches[i].w.mu.Unlock()
				watches = append(watches[:i], watches[i+1:]...)
			}
		case 3, 4: // SotW response
			version++
			var res []*anypb.Any
			for range int(next() % 5) {
				res = append(res, resource(typeURL, false))
			}
			h.respond(&transport.Response{TypeURL: typeURL, Version: fmt.Sprint(version), Nonce: "n", Resources: res})
		case 5, 6: // delta response
			version++
			var res []*discoveryv3.Resource
			for range int(next() % 4) {
				a := resource(typeURL, true)
				var r discoveryv3.Resource
				if err := a.UnmarshalTo(&r); err != nil {
					continue
				}
				res = append(res, &r)
			}
			var removed []string
			for range int(next() % 3) {
				removed = append(removed, pick("A", "B", "C"))
			}
			var variants []*discoveryv3.ResourceName
			if v := int(next() % 8); v < len(fuzzConstraints) && fuzzConstraints[v] != nil {
				variants = append(variants, &discoveryv3.ResourceName{Name: pick("A", "B", "C"), DynamicParameterConstraints: fuzzConstraints[v]})
			}
			h.respond(&transport.Response{TypeURL: typeURL, Nonce: "n", Delta: true, DeltaResources: res, Removed: removed, RemovedVariants: variants})
		case 7:
			h.transport().fail(fmt.Errorf("stream %d failed", version))
		case 8:
			h.sent(typeURL, "A", "B", "C")
		case 9:
			h.transport().handler.ResourceVersions(typeURL)
		}
		h.sync()
		checkWatchesAgreeWithCache(t, h, watches)
	}
	return consumed
}

// fuzzConstraints are the variants' constraints, fuzzParams the watches'
// parameters the fuzz driver picks from.
var (
	fuzzConstraints = []*discoveryv3.DynamicParameterConstraints{
		nil,
		{Type: &discoveryv3.DynamicParameterConstraints_Constraint{Constraint: &discoveryv3.DynamicParameterConstraints_SingleConstraint{
			Key: "env", ConstraintType: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Value{Value: "a"}}}},
		{Type: &discoveryv3.DynamicParameterConstraints_NotConstraints{NotConstraints: &discoveryv3.DynamicParameterConstraints{
			Type: &discoveryv3.DynamicParameterConstraints_Constraint{Constraint: &discoveryv3.DynamicParameterConstraints_SingleConstraint{
				Key: "env", ConstraintType: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Exists_{Exists: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Exists{}}}}}}},
	}
	fuzzParams = []map[string]string{nil, nil, {"env": "a"}, {"env": "b"}}
)

// hasTransport tells, without waiting, whether the client built its
// transport yet.
func (h *harness) hasTransport() bool {
	if h.ft != nil {
		return true
	}
	select {
	case h.ft = <-h.builder.built:
		return true
	default:
		return false
	}
}

func checkWatchesAgreeWithCache(t *testing.T, h *harness, watches []*fuzzWatch) {
	t.Helper()
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	for _, tc := range h.c.caches {
		for name, e := range tc.entries {
			if e.status == StatusACKed && e.value == nil {
				t.Fatalf("%s is ACKED without a value", name)
			}
			// gRFC A88 keeps a deleted Listener's or Cluster's value (a
			// data error, status DOES_NOT_EXIST): that is the one way a
			// name that does not exist holds data.
			if e.status == StatusDoesNotExist && e.hasData() && !keptDeletion(tc, e) {
				t.Fatalf("%s does not exist yet holds data (value %v, rejected %v, last error %v)", name, e.value, e.rare().rawErr, e.rare().lastErr)
			}
			// Entries of a name with variants may share bytes (one variant
			// matching several subscriptions): byRaw leads to one of them.
			raw := e.raw()
			if o := tc.lookupRaw(raw); len(raw) > 0 && o != e && (tc.variants[e.name] == nil || o == nil || !bytes.Equal(o.raw(), raw)) {
				t.Fatalf("%s: its bytes do not lead back to it", name)
			}
		}
		for k, e := range tc.byRaw {
			if tc.entries[e.key()] != e || e.raw() == nil || tc.rawKey(e.raw()) != k {
				t.Fatalf("byRaw holds a stale entry for %s", e.name)
			}
		}
	}
	for _, fw := range watches {
		if fw.name == "*" {
			continue
		}
		tc := h.c.caches[fw.typeURL]
		if tc == nil {
			continue
		}
		e := tc.entries[fw.key]
		fw.w.mu.Lock()
		value, kind := fw.w.value, fw.w.lastKind
		fw.w.mu.Unlock()
		switch {
		case e == nil:
			t.Fatalf("%s is watched but not in the cache", fw.name)
		case e.value != nil && value != e.value.(*testValue):
			t.Fatalf("%s: the watcher's last value is not the cached one", fw.name)
		case e.value == nil && kind == "update":
			t.Fatalf("%s: the cache lost the value but the watcher was not told", fw.name)
		}
	}
}

// keptDeletion tells whether e is a deletion gRFC A88 keeps: a value
// (and, if a later version was rejected, that rejection) held on under
// DOES_NOT_EXIST because its server deleted a resource of a type every
// SotW response lists whole, without fail_on_data_errors.
func keptDeletion(tc *typeCache, e *entry) bool {
	return e.value != nil && tc.typ.AllResourcesRequiredInSotW() &&
		e.srv != nil && !e.srv.cfg.FailOnDataErrors() && !e.srv.files() &&
		errors.Is(e.rare().lastErr, ErrResourceNotFound)
}

// TestFuzzInputBounded holds the fuzz driver to its first maxFuzzInput
// bytes: a long input must cost no more than a short one, or minimising it
// keeps the fuzzer from fuzzing.
func TestFuzzInputBounded(t *testing.T) {
	long := make([]byte, 10*maxFuzzInput)
	for i := range long {
		long[i] = byte(i) // watches, cancels, responses, stream errors
	}
	if got := runFuzzOps(t, long); got > maxFuzzInput {
		t.Errorf("the driver read %d bytes of a %d-byte input, want at most %d", got, len(long), maxFuzzInput)
	}
}

// stallClock is a Clock whose timer fires when the test says so.
type stallClock struct {
	realClock
	f       func()
	stopped bool
}

func (c *stallClock) AfterFunc(_ time.Duration, f func()) Timer {
	c.f = f
	return c
}

func (c *stallClock) Stop() bool {
	c.stopped = true
	return true
}

// TestWatchInputReportsStall checks the fuzz target's deadline: an input
// that does not finish in time is reported by name, with the goroutines'
// stacks, instead of hanging the fuzzer.
func TestWatchInputReportsStall(t *testing.T) {
	clock := &stallClock{}
	input := []byte{7, 0, 'x'}
	var report string
	stop := watchInput(clock, input, fuzzInputDeadline, func(msg string) { report = msg })
	input[0] = 9 // the fuzzer reuses its buffer for the next input
	clock.f()    // the deadline passes
	if want := fmt.Sprintf("input %q has not finished after %v", []byte{7, 0, 'x'}, fuzzInputDeadline); !strings.Contains(report, want) {
		t.Errorf("report %.200q does not say %q", report, want)
	}
	if !strings.Contains(report, "TestWatchInputReportsStall") {
		t.Errorf("report %.200q has no stacks", report)
	}
	stop()
	if !clock.stopped {
		t.Error("stop did not stop the deadline's timer")
	}
}
