package client

import (
	"errors"
	"strings"
	"testing"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// A name with a NUL byte could reach the subscription whose key it spells
// (transport.SubscriptionKey): it is rejected wherever a server sends it,
// and refused when watched.
func TestNULInResourceNames(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := newRecorder()
	params := map[string]string{"env": "prod"}
	WatchWithOptions(h.c, wholeWorldType, "A", WatchOptions{DynamicParameters: params}, w)
	key := transport.SubscriptionKey("A", params)
	if got := h.nextSubs(); len(got.add) != 1 || got.add[0] != key {
		t.Fatalf("subscribed %v, want [%q]", got.add, key)
	}
	// Wrapped under the key, as a plain body named by it, removed by it.
	err := h.sotw(resources.ListenerTypeURL, "1", mustAny(wrapped(key, "1", 0, lis("A", "1"))), lis(key, "2"))
	if err == nil || strings.Count(err.Error(), "cannot contain a NUL byte") != 2 {
		t.Fatalf("verdict %v, want both resources rejected for their NUL byte", err)
	}
	if err := h.delta(resources.ListenerTypeURL, []string{key}); err != nil {
		t.Fatalf("removal by key: %v", err)
	}
	h.sync()
	w.none(t)

	bad := newRecorder()
	Watch(h.c, wholeWorldType, "B\x00x", bad)
	if xe := bad.wantError(t, "resource-error", ErrInvalidName); xe.Name != "B\x00x" {
		t.Fatalf("error names %q", xe.Name)
	}
}

// The names a transport reports unservable (a type without a service on
// per-type streams) are the keys it was given: they reach the subscription
// with parameters.
func TestUnservableReachesParameterisedWatch(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := newRecorder()
	params := map[string]string{"env": "prod"}
	WatchWithOptions(h.c, wholeWorldType, "A", WatchOptions{DynamicParameters: params}, w)
	key := transport.SubscriptionKey("A", params)
	h.nextSubs()
	h.transport().handler.OnUnservable(resources.ListenerTypeURL, []string{key}, errors.New("no service"))
	xe := w.wantError(t, "resource-error", ErrServerUnavailable)
	if xe.Name != "A" || xe.DynamicParameters["env"] != "prod" {
		t.Fatalf("error for %q %v", xe.Name, xe.DynamicParameters)
	}
}
