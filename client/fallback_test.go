package client

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// Fallback (gRFC A71) over fake transports, where the order of events is
// the test's: end-to-end tests with two real servers are in client/test.

func fallbackBootstrap() *bootstrap.Config {
	cfg := testBootstrap()
	cfg.Servers = append(cfg.Servers, bootstrap.ServerConfig{
		ServerURI:    "fallback.example.com:443",
		ChannelCreds: []bootstrap.ChannelCreds{{Type: "insecure"}},
	})
	return cfg
}

// built waits for the client to build its next transport.
func (h *harness) built() *fakeTransport {
	h.t.Helper()
	select {
	case ft := <-h.builder.built:
		return ft
	case <-time.After(testTimeout):
		h.t.Fatal("no transport built")
	}
	return nil
}

// respondOn hands r to the client as if ft had received it.
func (h *harness) respondOn(ft *fakeTransport, r *transport.Response) error {
	h.t.Helper()
	done := make(chan struct{})
	ft.answered.Store(true)
	err := ft.handler.OnResponse(r, func() { close(done) })
	select {
	case <-done:
	case <-time.After(testTimeout):
		h.t.Fatal("response never done")
	}
	return err
}

// waitSubscribed waits until ft has been asked for exactly names of typeURL.
func waitSubscribed(t *testing.T, ft *fakeTransport, typeURL string, names ...string) {
	t.Helper()
	for {
		got := ft.subscribed(typeURL)
		same := len(got) == len(names)
		for _, n := range names {
			same = same && got[n]
		}
		if same {
			return
		}
		select {
		case <-ft.updates:
		case <-time.After(testTimeout):
			t.Fatalf("%s subscribed to %v, want %v", ft.server.ServerURI, got, names)
		}
	}
}

func serverOf(h *harness, name string) string {
	st, _ := h.status(resources.ListenerTypeURL, name)
	return st.Server
}

var errDown = errors.New("connection refused")

// fallBack fails the primary transport without a response, and returns the
// fallback's transport and the primary's new one (see renewLocked), after
// checking the old one is closed.
func (h *harness) fallBack(primary *fakeTransport) (fb, renewed *fakeTransport) {
	h.t.Helper()
	primary.fail(errDown)
	fb, renewed = h.built(), h.built()
	if fb.server.ServerURI != "fallback.example.com:443" || renewed.server.ServerURI != primary.server.ServerURI {
		h.t.Fatalf("built transports to %s and %s, want the fallback and the primary anew", fb.server.ServerURI, renewed.server.ServerURI)
	}
	select {
	case <-primary.closedC:
	case <-time.After(testTimeout):
		h.t.Fatal("the primary's old transport was not closed")
	}
	return fb, renewed
}

// The whole cycle, step by step: the primary fails without answering while
// a watcher waits, the client moves to the fallback without telling the
// watcher, applies the fallback's data, goes back when the primary answers,
// closes the fallback, and ignores what the fallback still says.
func TestFallbackCycle(t *testing.T) {
	h := newHarness(t, fallbackBootstrap(), Options{})
	w := h.watchAll(wholeWorldType, "L1")
	fb, primary := h.fallBack(h.transport())
	waitSubscribed(t, fb, resources.ListenerTypeURL, "L1")
	waitSubscribed(t, primary, resources.ListenerTypeURL, "L1")
	h.sync()
	w["L1"].none(t) // not told: the fallback may serve

	if err := h.respondOn(fb, &transport.Response{TypeURL: resources.ListenerTypeURL, Version: "f1", Nonce: "f", Resources: anys(lis("L1", "fb"))}); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "fb")
	if s := serverOf(h, "L1"); s != "fallback.example.com:443" {
		t.Fatalf("L1 from %q, want the fallback", s)
	}

	// Names watched meanwhile go to both: the primary must know every name
	// by the time it answers. A repeated failure of the primary changes
	// nothing.
	w2 := newRecorder()
	Watch(h.c, wholeWorldType, "L2", w2)
	waitSubscribed(t, fb, resources.ListenerTypeURL, "L1", "L2")
	waitSubscribed(t, primary, resources.ListenerTypeURL, "L1", "L2")
	primary.fail(errDown)
	h.sync()
	w["L1"].none(t)
	w2.none(t)

	// The primary answers: it is current again before its response
	// applies, so whole-world deletion judges the primary's entries.
	if err := h.respondOn(primary, &transport.Response{TypeURL: resources.ListenerTypeURL, Version: "p1", Nonce: "p", Resources: anys(lis("L1", "primary"))}); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "primary")
	select {
	case <-fb.closedC:
	case <-time.After(testTimeout):
		t.Fatal("fallback transport not closed")
	}
	if s := serverOf(h, "L1"); s != "xds.example.com:443" {
		t.Fatalf("L1 from %q, want the primary", s)
	}

	// A response the fallback received before it was closed is ignored.
	if err := h.respondOn(fb, &transport.Response{TypeURL: resources.ListenerTypeURL, Version: "f2", Nonce: "f2", Resources: anys(lis("L1", "stale"), lis("L2", "stale"))}); err != nil {
		t.Fatal(err)
	}
	h.sync()
	w["L1"].none(t)
	w2.none(t)
	fb.fail(errDown)
	h.sync()
	w["L1"].none(t)
	w2.none(t)
}

// With every watched resource cached, a failed primary is reported to the
// watchers and no fallback is made; nor is one when the last server fails.
func TestFallbackNeedsAWaitingWatcher(t *testing.T) {
	h := newHarness(t, fallbackBootstrap(), Options{})
	w := h.watchAll(wholeWorldType, "L1")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "a")
	// The stream that answered ends (routine), then the next one fails
	// without an answer.
	h.transport().fail(errDown)
	h.transport().fail(errDown)
	w["L1"].wantError(t, "ambient-error", ErrServerUnavailable)
	select {
	case ft := <-h.builder.built:
		t.Fatalf("built a transport to %s with everything cached", ft.server.ServerURI)
	default:
	}

	// A resource known not to exist is cached too (gRFC A71).
	h2 := newHarness(t, fallbackBootstrap(), Options{})
	w2 := newRecorder()
	Watch(h2.c, partialType, "R1", w2)
	for len(h2.transport().subscribed(resources.RouteConfigTypeURL)) == 0 {
		h2.nextSubs()
	}
	if err := h2.delta(resources.RouteConfigTypeURL, []string{"R1"}); err != nil {
		t.Fatal(err)
	}
	w2.wantError(t, "resource-error", ErrResourceNotFound)
	h2.transport().fail(errDown)
	h2.transport().fail(errDown)
	h2.sync()
	select {
	case ft := <-h2.builder.built:
		t.Fatalf("built a transport to %s with everything cached", ft.server.ServerURI)
	default:
	}

	// The fallback fails too: now the waiting watcher is told.
	h3 := newHarness(t, fallbackBootstrap(), Options{})
	w3 := h3.watchAll(wholeWorldType, "L1")
	h3.transport().fail(errDown)
	fb := h3.built()
	waitSubscribed(t, fb, resources.ListenerTypeURL, "L1")
	fb.fail(errDown)
	w3["L1"].wantError(t, "resource-error", ErrServerUnavailable)
}

// Does-not-exist timers belong to the server that was sent the name: they
// stop at a switch, and a name still waited for when the client goes back
// to the primary, which has had it all along, is timed from then.
func TestFallbackTimersFollowTheServer(t *testing.T) {
	h := newHarness(t, fallbackBootstrap(), Options{WatchExpiry: 50 * time.Millisecond})
	w := h.watchAll(wholeWorldType, "L1", "L2")
	fb, primary := h.fallBack(h.transport())
	waitSubscribed(t, fb, resources.ListenerTypeURL, "L1", "L2")
	// The primary reports the names sent on a new stream, which is not the
	// current one: no timer starts.
	primary.handler.OnSubscriptionsSent(resources.ListenerTypeURL, []string{"L1", "L2"})
	if err := h.respondOn(fb, &transport.Response{TypeURL: resources.ListenerTypeURL, Version: "f1", Nonce: "f", Resources: anys(lis("L1", "fb"))}); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "fb")
	start := time.Now()
	if err := h.respondOn(primary, &transport.Response{TypeURL: resources.ListenerTypeURL, Version: "p1", Nonce: "p", Resources: anys(lis("L1", "primary"))}); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "primary")
	w["L2"].wantError(t, "resource-error", ErrResourceNotFound)
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("L2 reported missing %v after the switch back, before its timer of 50ms", d)
	}
}

func anys(as ...*anypb.Any) []*anypb.Any { return as }

// Each authority falls back on its own: an xdstp authority with servers of
// its own moves to its fallback while the top-level servers, whose
// watchers have everything, stay.
func TestFallbackPerAuthority(t *testing.T) {
	cfg := fallbackBootstrap()
	creds := []bootstrap.ChannelCreds{{Type: "insecure"}}
	cfg.Authorities = map[string]bootstrap.Authority{"auth": {Servers: []bootstrap.ServerConfig{
		{ServerURI: "auth-primary.example.com:443", ChannelCreds: creds},
		{ServerURI: "auth-fallback.example.com:443", ChannelCreds: creds},
	}}}
	h := newHarness(t, cfg, Options{})
	w := h.watchAll(wholeWorldType, "L1")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "a")

	const name = "xdstp://auth/envoy.config.listener.v3.Listener/x"
	wx := newRecorder()
	Watch(h.c, wholeWorldType, name, wx)
	ap := h.built()
	if ap.server.ServerURI != "auth-primary.example.com:443" {
		t.Fatalf("built a transport to %s, want the authority's primary", ap.server.ServerURI)
	}
	waitSubscribed(t, ap, resources.ListenerTypeURL, name)
	ap.fail(errDown)
	af := h.built()
	if af.server.ServerURI != "auth-fallback.example.com:443" {
		t.Fatalf("built a transport to %s, want the authority's fallback", af.server.ServerURI)
	}
	waitSubscribed(t, af, resources.ListenerTypeURL, name)
	if got := af.subscribed(resources.ListenerTypeURL); got["L1"] {
		t.Fatal("the authority's fallback was asked for a top-level name")
	}
	if err := h.respondOn(af, &transport.Response{TypeURL: resources.ListenerTypeURL, Version: "1", Nonce: "n", Resources: anys(lis(name, "fb"))}); err != nil {
		t.Fatal(err)
	}
	wx.wantUpdate(t, name, "fb")
	h.sync()
	w["L1"].none(t)
	if s := serverOf(h, "L1"); s != "xds.example.com:443" {
		t.Fatalf("L1 from %q, want the top-level primary", s)
	}
}

// A fallback server another authority shares and found down is no
// fallback: the waiting watcher is told at once. Once that server answers,
// the next failure of the primary falls back to it.
func TestFallbackSkipsAServerKnownDown(t *testing.T) {
	cfg := fallbackBootstrap()
	cfg.Authorities = map[string]bootstrap.Authority{"auth": {Servers: cfg.Servers[1:]}}
	h := newHarness(t, cfg, Options{})
	const name = "xdstp://auth/envoy.config.listener.v3.Listener/x"
	wx := newRecorder()
	Watch(h.c, wholeWorldType, name, wx)
	shared := h.built()
	waitSubscribed(t, shared, resources.ListenerTypeURL, name)
	shared.fail(errDown)
	wx.wantError(t, "resource-error", ErrServerUnavailable)

	w := h.watchAll(wholeWorldType, "L1")
	primary := h.transport()
	primary.fail(errDown)
	w["L1"].wantError(t, "resource-error", ErrServerUnavailable)
	if got := shared.subscribed(resources.ListenerTypeURL); got["L1"] {
		t.Fatal("fell back to a server known to be down")
	}

	if err := h.respondOn(shared, &transport.Response{TypeURL: resources.ListenerTypeURL, Version: "1", Nonce: "n", Resources: anys(lis(name, "x"), lis("L1", "fb"))}); err != nil {
		t.Fatal(err)
	}
	wx.wantUpdate(t, name, "x")
	primary.fail(errDown)
	waitSubscribed(t, shared, resources.ListenerTypeURL, name, "L1")
	if err := h.respondOn(shared, &transport.Response{TypeURL: resources.ListenerTypeURL, Version: "2", Nonce: "n2", Resources: anys(lis(name, "x"), lis("L1", "fb"))}); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "fb")
	h.sync()
	wx.none(t)
}

// A wildcard watch that has had no response of its type waits on what the
// cache lacks: it falls back too; once answered, it does not.
func TestFallbackForAWildcardWatch(t *testing.T) {
	h := newHarness(t, fallbackBootstrap(), Options{})
	w := newRecorder()
	Watch(h.c, wholeWorldType, resources.Wildcard, w)
	waitSubscribed(t, h.transport(), resources.ListenerTypeURL, resources.Wildcard)
	fb, primary := h.fallBack(h.transport())
	waitSubscribed(t, fb, resources.ListenerTypeURL, resources.Wildcard)
	waitSubscribed(t, primary, resources.ListenerTypeURL, resources.Wildcard)
	if err := h.respondOn(fb, &transport.Response{TypeURL: resources.ListenerTypeURL, Version: "1", Nonce: "n", Resources: anys(lis("L1", "fb"))}); err != nil {
		t.Fatal(err)
	}
	w.wantUpdate(t, "L1", "fb")

	// Answered: a failure of the fallback now is only reported.
	if err := h.respondOn(primary, &transport.Response{TypeURL: resources.ListenerTypeURL, Version: "1", Nonce: "n", Resources: anys(lis("L1", "fb"))}); err != nil {
		t.Fatal(err)
	}
	h.sync()
	w.none(t)             // the same bytes
	primary.fail(errDown) // the stream that answered
	primary.fail(errDown) // the next one, without an answer
	w.wantError(t, "ambient-error", ErrServerUnavailable)
	select {
	case ft := <-h.builder.built:
		t.Fatalf("built a transport to %s with the wildcard answered", ft.server.ServerURI)
	default:
	}
}

// Names a transport reports unservable by itself (a type its server has
// no service for) are no answer of the server: the client does not go back
// to it for them, nor are they applied while the fallback serves them.
func TestFallbackNotBackOnUnservable(t *testing.T) {
	h := newHarness(t, fallbackBootstrap(), Options{})
	w := h.watchAll(wholeWorldType, "L1")
	fb, primary := h.fallBack(h.transport())
	waitSubscribed(t, fb, resources.ListenerTypeURL, "L1")
	w2 := newRecorder()
	Watch(h.c, partialType, "R1", w2)
	waitSubscribed(t, primary, resources.RouteConfigTypeURL, "R1")
	primary.handler.OnUnservable(resources.RouteConfigTypeURL, []string{"R1"}, errors.New("no service"))
	h.sync()
	w2.none(t) // the fallback serves R1: the primary's report is not applied
	select {
	case <-fb.closedC:
		t.Fatal("the fallback was closed for a transport's report")
	default:
	}
	if err := h.respondOn(fb, &transport.Response{TypeURL: resources.ListenerTypeURL, Version: "1", Nonce: "n", Resources: anys(lis("L1", "fb"))}); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "fb")
}
