package client

import (
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

func TestWatchersOfOneNameShareSubscriptionAndDecode(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w1, w2 := newRecorder(), newRecorder()
	Watch(h.c, wholeWorldType, "L1", w1)
	Watch(h.c, wholeWorldType, "L1", w2)
	if u := h.nextSubs(); !reflect.DeepEqual(u.add, []string{"L1"}) || u.remove != nil {
		t.Fatalf("subscription change %+v, want add [L1]", u)
	}
	before := decodes.Load()
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	if got := decodes.Load() - before; got != 1 {
		t.Errorf("decoded %d times, want once for two watchers", got)
	}
	w1.wantUpdate(t, "L1", "a")
	w2.wantUpdate(t, "L1", "a")
	select {
	case u := <-h.transport().updates:
		t.Fatalf("unexpected second subscription change %+v", u)
	default:
	}
}

func TestNewWatcherOfCachedResourceGetsItAtOnce(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w1 := newRecorder()
	Watch(h.c, wholeWorldType, "L1", w1)
	h.nextSubs()
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	w1.wantUpdate(t, "L1", "a")
	w2 := newRecorder()
	Watch(h.c, wholeWorldType, "L1", w2)
	w2.wantUpdate(t, "L1", "a")
	h.sync()
	if len(h.transport().updates) != 0 {
		t.Error("a watcher of a cached, subscribed name changed subscriptions")
	}
}

func TestLastCancelUnsubscribesAndForgets(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w1, w2 := newRecorder(), newRecorder()
	cancel1 := Watch(h.c, wholeWorldType, "L1", w1)
	cancel2 := Watch(h.c, wholeWorldType, "L1", w2)
	h.nextSubs()
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	cancel1()
	cancel1() // idempotent
	h.sync()
	if len(h.transport().updates) != 0 {
		t.Fatal("unsubscribed while a watcher remained")
	}
	cancel2()
	if u := h.nextSubs(); !reflect.DeepEqual(u.remove, []string{"L1"}) {
		t.Fatalf("subscription change %+v, want remove [L1]", u)
	}
	if d := h.c.Dump(); len(d) != 0 {
		t.Fatalf("cache still holds %+v after the last cancel", d)
	}
	// Watching again starts from nothing: no stale value is replayed.
	w3 := newRecorder()
	Watch(h.c, wholeWorldType, "L1", w3)
	if u := h.nextSubs(); !reflect.DeepEqual(u.add, []string{"L1"}) {
		t.Fatalf("subscription change %+v, want add [L1]", u)
	}
	h.sync()
	w3.none(t)
}

func TestNoCallbackAfterCancel(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := newRecorder()
	cancel := Watch(h.c, wholeWorldType, "L1", w)
	Watch(h.c, wholeWorldType, "L1", newRecorder()) // keeps the subscription
	h.nextSubs()
	cancel()
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	w.none(t)
}

// A callback may watch and cancel: callbacks run with no client lock held.
func TestCallbacksMayReenterTheClient(t *testing.T) {
	h := newHarness(t, nil, Options{})
	inner := newRecorder()
	var cancelSelf func()
	var mu sync.Mutex
	w := WatcherFuncs[*testValue]{OnUpdate: func(v *testValue) {
		Watch(h.c, partialType, "R-"+v.name, inner)
		mu.Lock()
		cancelSelf()
		mu.Unlock()
	}}
	mu.Lock()
	cancelSelf = Watch(h.c, wholeWorldType, "L1", w)
	mu.Unlock()
	h.nextSubs()
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	got := map[string]subUpdate{}
	for range 2 {
		u := h.nextSubs()
		got[u.typeURL] = u
	}
	if u := got[resources.RouteConfigTypeURL]; !reflect.DeepEqual(u.add, []string{"R-L1"}) {
		t.Errorf("route subscription %+v, want add [R-L1]", u)
	}
	if u := got[resources.ListenerTypeURL]; !reflect.DeepEqual(u.remove, []string{"L1"}) {
		t.Errorf("listener subscription %+v, want remove [L1]", u)
	}
}

// The names the callbacks for one response subscribe to go to the transport
// as one change, not one per callback.
func TestSubscriptionsFromOneResponseAreBatched(t *testing.T) {
	h := newHarness(t, nil, Options{})
	const n = 100
	var all []string
	for i := range n {
		name := fmt.Sprintf("L%03d", i)
		all = append(all, name)
		Watch(h.c, wholeWorldType, name, WatcherFuncs[*testValue]{OnUpdate: func(v *testValue) {
			Watch(h.c, partialType, "R-"+v.name, newRecorder())
		}})
	}
	// Watches made outside callbacks may reach the transport in several
	// changes (it coalesces them into requests itself); drain them.
	for added := 0; added < n; {
		added += len(h.nextSubs().add)
	}
	var res []*anypb.Any
	for _, name := range all {
		res = append(res, lis(name, "x"))
	}
	if err := h.sotw(resources.ListenerTypeURL, "1", res...); err != nil {
		t.Fatal(err)
	}
	u := h.nextSubs()
	if u.typeURL != resources.RouteConfigTypeURL || len(u.add) != n {
		t.Fatalf("got change of %s adding %d names, want %d route names at once", u.typeURL, len(u.add), n)
	}
	h.sync()
	if len(h.transport().updates) != 0 {
		t.Fatal("more than one subscription change for one response")
	}
}

func TestManyConcurrentWatchersOfOneName(t *testing.T) {
	h := newHarness(t, nil, Options{})
	const n = 100
	recs := make([]*recorder, n)
	var wg sync.WaitGroup
	for i := range n {
		recs[i] = newRecorder()
		wg.Go(func() { Watch(h.c, wholeWorldType, "L1", recs[i]) })
	}
	wg.Wait()
	if u := h.nextSubs(); !reflect.DeepEqual(u.add, []string{"L1"}) {
		t.Fatalf("subscription change %+v, want one add of L1", u)
	}
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.wantUpdate(t, "L1", "a")
	}
	if d := h.c.Dump(); len(d) != 1 || d[0].Watchers != n {
		t.Fatalf("dump %+v, want one resource with %d watchers", d, n)
	}
}

func TestWildcardWatch(t *testing.T) {
	h := newHarness(t, nil, Options{})
	ww := newRecorder()
	cancelWild := Watch(h.c, wholeWorldType, "*", ww)
	if u := h.nextSubs(); !reflect.DeepEqual(u.add, []string{"*"}) {
		t.Fatalf("subscription change %+v, want add [*]", u)
	}
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("A", "1"), lis("B", "1")); err != nil {
		t.Fatal(err)
	}
	got := []string{ww.next(t).value.name, ww.next(t).value.name}
	sort.Strings(got)
	if !reflect.DeepEqual(got, []string{"A", "B"}) {
		t.Fatalf("wildcard watcher saw %v, want A and B", got)
	}
	// A named watch of a resource known through the wildcard gets it at once
	// and also subscribes by name, as the spec's mixed examples do.
	wa := newRecorder()
	cancelA := Watch(h.c, wholeWorldType, "A", wa)
	wa.wantUpdate(t, "A", "1")
	if u := h.nextSubs(); !reflect.DeepEqual(u.add, []string{"A"}) {
		t.Fatalf("subscription change %+v, want add [A]", u)
	}
	// B leaves the world: the wildcard watcher is told (an ambient error:
	// the value stays, gRFC A88).
	if err := h.sotw(resources.ListenerTypeURL, "2", lis("A", "1")); err != nil {
		t.Fatal(err)
	}
	if xe := ww.wantError(t, "ambient-error", ErrResourceNotFound); xe.Name != "B" {
		t.Fatalf("deletion reported for %q, want B", xe.Name)
	}
	// Cancelling the wildcard keeps A (named) and unsubscribes "*".
	cancelWild()
	if u := h.nextSubs(); !reflect.DeepEqual(u.remove, []string{"*"}) {
		t.Fatalf("subscription change %+v, want remove [*]", u)
	}
	if d := h.c.Dump(); len(d) != 1 || d[0].Name != "A" {
		t.Fatalf("dump %+v, want only A", d)
	}
	cancelA()
	h.nextSubs()
	if d := h.c.Dump(); len(d) != 0 {
		t.Fatalf("dump %+v, want empty", d)
	}
}

// A name also covered by the wildcard stays cached when its last named
// watcher goes, since the wildcard still wants it.
func TestUnwatchNameCoveredByWildcardKeepsResource(t *testing.T) {
	h := newHarness(t, nil, Options{})
	Watch(h.c, wholeWorldType, "*", newRecorder())
	cancelA := Watch(h.c, wholeWorldType, "A", newRecorder())
	h.nextSubs()
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("A", "1")); err != nil {
		t.Fatal(err)
	}
	cancelA()
	h.sync()
	if d := h.c.Dump(); len(d) != 1 || d[0].Name != "A" || d[0].Status != StatusACKed {
		t.Fatalf("dump %+v, want A still ACKed", d)
	}
}

func TestWatchErrors(t *testing.T) {
	cfg := testBootstrap()
	cfg.Authorities = map[string]bootstrap.Authority{"known": {}}
	h := newHarness(t, cfg, Options{})
	for _, tc := range []struct {
		desc string
		typ  *resources.Type[*testValue]
		name string
		want error
	}{
		{"wildcard on a type without it", partialType, "*", ErrResourceInvalid},
		{"unknown authority", wholeWorldType, "xdstp://unknown/envoy.config.listener.v3.Listener/l", ErrUnknownAuthority},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			w := newRecorder()
			Watch(h.c, tc.typ, tc.name, w)
			w.wantError(t, "resource-error", tc.want)
		})
	}
	t.Run("delta-only type on a SotW server", func(t *testing.T) {
		deltaOnly := resources.NewType(resources.TypeOptions[*testValue]{
			TypeURL: resources.VirtualHostTypeURL, DeltaOnly: true,
			Decode: func(*resources.DecodeContext, *anypb.Any) (string, *testValue, error) { return "", nil, errTest },
		})
		h := newHarness(t, nil, Options{ResourceTypes: []resources.AnyType{deltaOnly}})
		w := newRecorder()
		Watch(h.c, deltaOnly, "rc/foo.com", w)
		w.wantError(t, "resource-error", ErrResourceInvalid)
	})
	t.Run("type not known to the client", func(t *testing.T) {
		w := newRecorder()
		h.c.WatchResource(resources.ClusterTypeURL, "c", WatcherFuncs[resources.Resource]{
			OnResourceError: func(err error) { w.ResourceError(err) },
		})
		w.wantError(t, "resource-error", ErrResourceInvalid)
	})
}

// xdstp names go to their authority's servers; the authority with no
// servers of its own uses the top-level ones.
func TestAuthoritiesPickTheirServer(t *testing.T) {
	cfg := testBootstrap()
	other := bootstrap.ServerConfig{ServerURI: "other.example.com:443", ChannelCreds: []bootstrap.ChannelCreds{{Type: "insecure"}}}
	cfg.Authorities = map[string]bootstrap.Authority{
		"a.example.com": {Servers: []bootstrap.ServerConfig{other}},
		"b.example.com": {},
	}
	h := newHarness(t, cfg, Options{})
	Watch(h.c, wholeWorldType, "xdstp://a.example.com/envoy.config.listener.v3.Listener/x", newRecorder())
	first := h.transport()
	if first.server.ServerURI != "other.example.com:443" {
		t.Fatalf("authority a used %s, want other.example.com:443", first.server.ServerURI)
	}
	Watch(h.c, wholeWorldType, "xdstp://b.example.com/envoy.config.listener.v3.Listener/y", newRecorder())
	select {
	case ft := <-h.builder.built:
		if ft.server.ServerURI != "xds.example.com:443" {
			t.Fatalf("authority b used %s, want the top-level server", ft.server.ServerURI)
		}
	case <-h.c.cbs.done:
	}
}

func TestCloseStopsEverything(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := newRecorder()
	Watch(h.c, wholeWorldType, "L1", w)
	h.sent(resources.ListenerTypeURL, "L1")
	h.c.Close()
	h.c.Close()
	if !h.transport().closed {
		t.Fatal("transport not closed")
	}
	// Reports after Close are ignored and never block.
	if err := h.transport().handler.OnResponse(&transport.Response{TypeURL: resources.ListenerTypeURL}, func() {}); err != nil {
		t.Fatalf("verdict after close: %v", err)
	}
	// A watch after Close is told so (on a goroutine of its own, so a
	// cancel made at once may or may not come first: see Watch), and
	// nothing else.
	cancel := Watch(h.c, wholeWorldType, "L2", w)
	w.wantError(t, "resource-error", ErrClosed)
	cancel()
	w.none(t)
}

// TestSubscriptionChangesOfOneCallbackCancelOut: watches started and
// cancelled in one callback reach the transport as one change naming each
// name once, with a name subscribed, withdrawn and subscribed again in it
// once, and one subscribed and withdrawn not at all; and a name withdrawn
// and wanted again before the flush is not sent at all.
func TestSubscriptionChangesOfOneCallbackCancelOut(t *testing.T) {
	h := newHarness(t, nil, Options{})
	inCallback := func(f func()) {
		done := make(chan struct{})
		h.c.cbs.schedule(func() { f(); close(done) })
		<-done
	}
	w := WatcherFuncs[*testValue]{}
	cancels := make(map[string]func())
	inCallback(func() {
		for _, name := range []string{"R1", "R2", "R3", "R4"} {
			cancels[name] = Watch(h.c, partialType, name, w)
		}
		cancels["R2"]()
		cancels["R2"] = Watch(h.c, partialType, "R2", w)
		cancels["R4"]()
	})
	u := h.nextSubs()
	sort.Strings(u.add)
	if !reflect.DeepEqual(u.add, []string{"R1", "R2", "R3"}) || len(u.remove) != 0 {
		t.Fatalf("subscription change %+v, want add [R1 R2 R3] and no removal", u)
	}
	inCallback(func() {
		cancels["R1"]()
		cancels["R1"] = Watch(h.c, partialType, "R1", w)
		cancels["R5"] = Watch(h.c, partialType, "R5", w)
	})
	if u := h.nextSubs(); !reflect.DeepEqual(u.add, []string{"R5"}) || len(u.remove) != 0 {
		t.Fatalf("subscription change %+v, want add [R5] and no removal", u)
	}
}
