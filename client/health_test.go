package client

import (
	"errors"
	"testing"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// With one stream per type, a stream that fails without an answer is
// routine while another of the server's streams answered since it began
// (the server is up; its type had nothing to say yet); its next failure
// with nothing heard from the server meanwhile is an outage, told once.
// The transport says only what each stream did: the client judges.
func TestStreamEndJudgedAcrossStreams(t *testing.T) {
	h := newHarness(t, nil, Options{})
	wl := h.watchAll(wholeWorldType, "L1")
	wr := newRecorder()
	Watch(h.c, partialType, "R1", wr)
	ft := h.transport()
	end := func(answered bool, typeURL string) {
		ft.handler.OnStreamError(&transport.StreamError{Err: errors.New("stream of " + typeURL + " ended"), Answered: answered, TypeURLs: []string{typeURL}})
	}
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	wl["L1"].next(t)
	end(false, resources.RouteConfigTypeURL) // the listeners' stream answered meanwhile
	h.sync()
	wr.none(t)
	wl["L1"].none(t)
	end(false, resources.RouteConfigTypeURL) // nothing heard since its last end
	wr.wantError(t, "resource-error", ErrServerUnavailable)
	wl["L1"].wantError(t, "ambient-error", ErrServerUnavailable)
	end(false, resources.ListenerTypeURL) // the same outage
	h.sync()
	wr.none(t)
	wl["L1"].none(t)
}

// On one stream for every type, an unanswered end right after a stream
// that answered is an outage at once: the earlier answer was on another
// stream's life, not this one's.
func TestStreamEndAfterAnsweredStreamIsOutage(t *testing.T) {
	h := newHarness(t, nil, Options{})
	wl := h.watchAll(wholeWorldType, "L1")
	ft := h.transport()
	both := []string{resources.ListenerTypeURL, resources.RouteConfigTypeURL}
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	wl["L1"].next(t)
	ft.handler.OnStreamError(&transport.StreamError{Err: errors.New("reset"), Answered: true, TypeURLs: both[:1]})
	h.sync()
	wl["L1"].none(t)
	// The new stream carries a type the old one did not yet.
	ft.handler.OnStreamError(&transport.StreamError{Err: errors.New("refused"), TypeURLs: both})
	wl["L1"].wantError(t, "ambient-error", ErrServerUnavailable)
}
