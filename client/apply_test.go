package client

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// status returns the cached status of one resource.
func (h *harness) status(typeURL, name string) (ResourceStatus, bool) {
	for _, st := range h.c.Dump() {
		if st.TypeURL == typeURL && st.Name == name {
			return st, true
		}
	}
	return ResourceStatus{}, false
}

// watchAll watches names of a type with fresh recorders and waits for the
// subscription to reach the transport.
func (h *harness) watchAll(typ *resources.Type[*testValue], names ...string) map[string]*recorder {
	recs := make(map[string]*recorder)
	for _, n := range names {
		recs[n] = newRecorder()
		Watch(h.c, typ, n, recs[n])
	}
	h.sync()
	for len(h.transport().subscribed(typ.TypeURL())) < len(names) {
		h.nextSubs()
	}
	return recs
}

// With fail_on_data_errors (gRFC A88), a Listener missing from a response
// is deleted: its watchers get a resource error and the value goes.
func TestSotWWholeWorldTypeMissingResourceIsDeleted(t *testing.T) {
	h := newHarness(t, testBootstrap(bootstrap.FeatureFailOnDataErrors), Options{})
	w := h.watchAll(wholeWorldType, "L1", "L2")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a"), lis("L2", "a")); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "a")
	w["L2"].wantUpdate(t, "L2", "a")
	if err := h.sotw(resources.ListenerTypeURL, "2", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	w["L2"].wantError(t, "resource-error", ErrResourceNotFound)
	w["L1"].none(t)
	if st, _ := h.status(resources.ListenerTypeURL, "L2"); st.Status != StatusDoesNotExist || st.Value != nil {
		t.Fatalf("L2 status %v value %v, want DOES_NOT_EXIST and no value", st.Status, st.Value)
	}
	// A response with no resources deletes all of a whole-world type.
	if err := h.sotw(resources.ListenerTypeURL, "3"); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantError(t, "resource-error", ErrResourceNotFound)
	w["L2"].none(t)
}

// A Listener never received is not deleted by a response that lacks it: the
// response may predate the request. Its timer decides.
func TestSotWWholeWorldTypeNeverReceivedIsNotDeleted(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1", "L2")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "a")
	w["L2"].none(t)
	if st, _ := h.status(resources.ListenerTypeURL, "L2"); st.Status != StatusRequested {
		t.Fatalf("L2 status %v, want REQUESTED", st.Status)
	}
}

// Without fail_on_data_errors, a Listener missing from a response is kept
// (gRFC A88): its watchers get an ambient error, told once however often
// the server omits it; the status is DOES_NOT_EXIST with the value; a
// watcher that comes later gets the value, then the error; the resource
// sent again, unchanged, ends the error without a new update.
// ignore_resource_deletion, which A88 deprecates, makes no difference.
func TestSotWWholeWorldDeletionKeptWithoutFailOnDataErrors(t *testing.T) {
	for _, features := range [][]string{nil, {bootstrap.FeatureIgnoreResourceDeletion}} {
		t.Run(fmt.Sprint(features), func(t *testing.T) {
			h := newHarness(t, testBootstrap(features...), Options{})
			w := h.watchAll(wholeWorldType, "L1", "L2")
			if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a"), lis("L2", "a")); err != nil {
				t.Fatal(err)
			}
			w["L1"].next(t)
			w["L2"].next(t)
			for _, v := range []string{"2", "3"} {
				if err := h.sotw(resources.ListenerTypeURL, v, lis("L1", "a")); err != nil {
					t.Fatal(err)
				}
			}
			w["L2"].wantError(t, "ambient-error", ErrResourceNotFound)
			w["L2"].none(t)
			w["L1"].none(t)
			if st, _ := h.status(resources.ListenerTypeURL, "L2"); st.Status != StatusDoesNotExist || st.Value == nil {
				t.Fatalf("L2 status %v value %v, want DOES_NOT_EXIST with the value kept", st.Status, st.Value)
			}
			if got := cacheStateOf(h.c, resources.ListenerTypeURL, "does_not_exist_but_cached"); got != 1 {
				t.Fatalf("%d resources does_not_exist_but_cached, want 1", got)
			}
			late := newRecorder()
			Watch(h.c, wholeWorldType, "L2", late)
			late.wantUpdate(t, "L2", "a")
			late.wantError(t, "ambient-error", ErrResourceNotFound)
			if err := h.sotw(resources.ListenerTypeURL, "4", lis("L1", "a"), lis("L2", "a")); err != nil {
				t.Fatal(err)
			}
			if st, _ := h.status(resources.ListenerTypeURL, "L2"); st.Status != StatusACKed || st.Value == nil {
				t.Fatalf("L2 back: status %v, want ACKED", st.Status)
			}
			w["L2"].none(t)
		})
	}
}

func cacheStateOf(c *Client, typeURL, state string) int {
	for _, rc := range c.ResourceCounts() {
		if rc.TypeURL == typeURL && rc.CacheState == state {
			return rc.Count
		}
	}
	return 0
}

func TestSotWPartialTypeAbsenceIsNotDeletion(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(partialType, "R1", "R2")
	if err := h.sotw(resources.RouteConfigTypeURL, "1", rc("R1", "a"), rc("R2", "a")); err != nil {
		t.Fatal(err)
	}
	w["R1"].next(t)
	w["R2"].next(t)
	if err := h.sotw(resources.RouteConfigTypeURL, "2", rc("R1", "b")); err != nil {
		t.Fatal(err)
	}
	w["R1"].wantUpdate(t, "R1", "b")
	if err := h.sotw(resources.RouteConfigTypeURL, "3"); err != nil {
		t.Fatal(err)
	}
	w["R1"].none(t)
	w["R2"].none(t)
	if st, _ := h.status(resources.RouteConfigTypeURL, "R2"); st.Status != StatusACKed {
		t.Fatalf("R2 status %v, want ACKED", st.Status)
	}
}

func TestResourcesNotAskedForAreIgnored(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1")
	before := decodes.Load()
	wrappedOther := mustAny(wrapped("other", "1", 0, lis("other", "a")))
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a"), wrappedOther); err != nil {
		t.Fatalf("ignoring a resource must not NACK: %v", err)
	}
	w["L1"].wantUpdate(t, "L1", "a")
	if _, ok := h.status(resources.ListenerTypeURL, "other"); ok {
		t.Fatal("an unrequested resource was cached")
	}
	if got := decodes.Load() - before; got != 1 {
		t.Errorf("decoded %d resources, want 1: a wrapped resource nobody wants needs no decode", got)
	}
}

func TestDuplicateNamesAreNACKedAndKeepLastGood(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1", "L2")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a"), lis("L2", "a")); err != nil {
		t.Fatal(err)
	}
	w["L1"].next(t)
	w["L2"].next(t)
	err := h.sotw(resources.ListenerTypeURL, "2", lis("L1", "b"), lis("L2", "b"), lis("L1", "c"))
	if err == nil || !strings.Contains(err.Error(), `"L1"`) || !strings.Contains(err.Error(), "more than once") {
		t.Fatalf("verdict %v, want a NACK naming the duplicate L1", err)
	}
	w["L1"].wantError(t, "ambient-error", ErrResourceInvalid)
	w["L2"].wantUpdate(t, "L2", "b") // the rest of the response applies
	st, _ := h.status(resources.ListenerTypeURL, "L1")
	if st.Status != StatusNACKed || st.Version != "1" {
		t.Fatalf("L1 status %v version %q, want NACKED keeping version 1", st.Status, st.Version)
	}
	nw := newRecorder()
	Watch(h.c, wholeWorldType, "L1", nw)
	nw.wantUpdate(t, "L1", "a")
}

func TestTypeURLMismatchIsNACKed(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1", "L2")
	// A plain body of the wrong type cannot be attributed to a resource.
	err := h.sotw(resources.ListenerTypeURL, "1", rc("L1", "a"), lis("L2", "a"))
	if err == nil || !strings.Contains(err.Error(), "type_url") {
		t.Fatalf("verdict %v, want a NACK about the type_url", err)
	}
	w["L2"].wantUpdate(t, "L2", "a")
	// Wrapped, the name is known: its watchers hear of it.
	err = h.sotw(resources.ListenerTypeURL, "2", mustAny(wrapped("L1", "2", 0, rc("L1", "a"))), lis("L2", "a"))
	if err == nil || !strings.Contains(err.Error(), "type_url") {
		t.Fatalf("verdict %v, want a NACK about the type_url", err)
	}
	if xe := w["L1"].wantError(t, "resource-error", ErrResourceInvalid); xe.Name != "L1" {
		t.Fatalf("error for %q, want L1", xe.Name)
	}
}

func TestUndecodableResourceIsNACKedAndDeletesNothing(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1", "L2")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a"), lis("L2", "a")); err != nil {
		t.Fatal(err)
	}
	w["L1"].next(t)
	w["L2"].next(t)
	garbage := &anypb.Any{TypeUrl: resources.ListenerTypeURL, Value: []byte{0xff, 0xff, 0xff}}
	err := h.sotw(resources.ListenerTypeURL, "2", lis("L1", "b"), garbage)
	if err == nil {
		t.Fatal("garbage was ACKed")
	}
	w["L1"].wantUpdate(t, "L1", "b")
	// L2 is missing, but so is whatever the garbage was: nothing is deleted.
	w["L2"].none(t)
	if st, _ := h.status(resources.ListenerTypeURL, "L2"); st.Status != StatusACKed {
		t.Fatalf("L2 status %v, want ACKED", st.Status)
	}
}

func TestInvalidUpdateKeepsLastGoodValue(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1", "L2", "L3")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a"), lis("L2", "a")); err != nil {
		t.Fatal(err)
	}
	w["L1"].next(t)
	w["L2"].next(t)
	err := h.sotw(resources.ListenerTypeURL, "2", lis("L1", "invalid"), lis("L2", "b"), lis("L3", "invalid"))
	if err == nil {
		t.Fatal("invalid resources were ACKed")
	}
	for _, name := range []string{`"L1"`, `"L3"`, "stat_prefix: invalid"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("NACK %q does not mention %s", err, name)
		}
	}
	w["L1"].wantError(t, "ambient-error", ErrResourceInvalid) // had a value: it stays
	w["L2"].wantUpdate(t, "L2", "b")
	w["L3"].wantError(t, "resource-error", ErrResourceInvalid) // never had one
	st, _ := h.status(resources.ListenerTypeURL, "L1")
	if st.Status != StatusNACKed || st.Version != "1" || st.Err == nil || st.Rejected == nil {
		t.Fatalf("L1 dump %+v, want NACKED, version 1, an error and the rejected bytes", st)
	}
	nw := newRecorder()
	Watch(h.c, wholeWorldType, "L1", nw)
	nw.wantUpdate(t, "L1", "a")
	nw.wantError(t, "ambient-error", ErrResourceInvalid)
}

// SotW resends every Listener and Cluster: unchanged bytes are neither
// decoded nor delivered again, and a rejected resend is rejected again.
func TestUnchangedResourcesAreNotDecodedOrRedelivered(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1", "L2")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a"), lis("L2", "invalid")); err == nil {
		t.Fatal("want NACK")
	}
	w["L1"].next(t)
	w["L2"].next(t)
	before := decodes.Load()
	err := h.sotw(resources.ListenerTypeURL, "2", lis("L1", "a"), lis("L2", "invalid"))
	if err == nil || !strings.Contains(err.Error(), "stat_prefix: invalid") {
		t.Fatalf("resent invalid resource: verdict %v, want the same NACK", err)
	}
	if got := decodes.Load() - before; got != 0 {
		t.Fatalf("decoded %d unchanged resources", got)
	}
	w["L1"].none(t)
	w["L2"].none(t)
	if st, _ := h.status(resources.ListenerTypeURL, "L1"); st.Version != "2" {
		t.Fatalf("L1 version %q, want 2: the version moves even when the bytes do not", st.Version)
	}
}

func TestDeltaRemovals(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(partialType, "R1", "R2", "R3")
	if err := h.delta(resources.RouteConfigTypeURL, nil, wrapped("R1", "v1", 0, rc("R1", "a"))); err != nil {
		t.Fatal(err)
	}
	w["R1"].wantUpdate(t, "R1", "a")
	// Removing a held resource deletes it; removing a subscribed name never
	// received is does-not-exist at once; unknown names are ignored.
	if err := h.delta(resources.RouteConfigTypeURL, []string{"R1", "R2", "unknown"}); err != nil {
		t.Fatal(err)
	}
	w["R1"].wantError(t, "resource-error", ErrResourceNotFound)
	w["R2"].wantError(t, "resource-error", ErrResourceNotFound)
	w["R3"].none(t)
	// A name both updated and removed is an error.
	err := h.delta(resources.RouteConfigTypeURL, []string{"R3"}, wrapped("R3", "v1", 0, rc("R3", "a")))
	if err == nil || !strings.Contains(err.Error(), "removed_resources") {
		t.Fatalf("verdict %v, want a NACK naming R3 in both lists", err)
	}
}

// Delta responses carry changes only: nothing is deleted by omission, even
// for whole-world types.
func TestDeltaResponseDeletesNothingByOmission(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1", "L2")
	if err := h.delta(resources.ListenerTypeURL, nil, wrapped("L1", "1", 0, lis("L1", "a")), wrapped("L2", "1", 0, lis("L2", "a"))); err != nil {
		t.Fatal(err)
	}
	w["L1"].next(t)
	w["L2"].next(t)
	if err := h.delta(resources.ListenerTypeURL, nil, wrapped("L1", "2", 0, lis("L1", "b"))); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "b")
	w["L2"].none(t)
	got := h.transport().handler.ResourceVersions(resources.ListenerTypeURL)
	if len(got) != 2 || got["L1"] != "2" || got["L2"] != "1" {
		t.Fatalf("held versions %v, want L1=2 L2=1", got)
	}
}

func TestServerReportedResourceErrors(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(partialType, "R1", "R2")
	err := h.respond(&transport.Response{TypeURL: resources.RouteConfigTypeURL, Version: "1", ResourceErrors: []*discoveryv3.ResourceError{
		{ResourceName: &discoveryv3.ResourceName{Name: "R1"}, ErrorDetail: &statuspb.Status{Code: int32(codes.NotFound), Message: "no such route"}},
		{ResourceName: &discoveryv3.ResourceName{Name: "R2"}, ErrorDetail: &statuspb.Status{Code: int32(codes.PermissionDenied), Message: "not for you"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w["R1"].wantError(t, "resource-error", ErrResourceNotFound)
	if e := w["R2"].next(t); e.kind != "resource-error" || !strings.Contains(e.err.Error(), "not for you") {
		t.Fatalf("R2 got %v, want the server's message", e)
	}
}

func TestUnknownResponseTypeIsNACKed(t *testing.T) {
	h := newHarness(t, nil, Options{})
	h.watchAll(wholeWorldType, "L1")
	if err := h.sotw(resources.SecretTypeURL, "1"); err == nil || !strings.Contains(err.Error(), "not known") {
		t.Fatalf("verdict %v, want a NACK for an unknown type", err)
	}
}

// The NACK's message is at most 4 KiB: the first errors whole, then how
// many more there were; an error too long for it alone is cut at a rune
// boundary.
func TestNACKErrorIsBounded(t *testing.T) {
	var errs []error
	for range 1000 {
		errs = append(errs, errTest)
	}
	msg := nackError(errs).Error()
	// "1000 errors: " is 13 bytes, each error 12 and its separator 2; room
	// is kept for the longest tail, "; and 1000 more errors".
	kept := (maxNACKBytes - 13 - len("; and 1000 more errors") + 2) / 14
	want := "1000 errors: " + strings.Repeat("bad resource; ", kept-1) + "bad resource" + fmt.Sprintf("; and %d more errors", 1000-kept)
	if msg != want {
		t.Fatalf("NACK of 1000 errors reads %.80q… (%d bytes), want %.80q… (%d bytes)", msg, len(msg), want, len(want))
	}
	if len(msg) > maxNACKBytes {
		t.Fatalf("NACK of %d bytes, want at most %d", len(msg), maxNACKBytes)
	}

	// One error longer than the bound, of multi-byte runes: cut, whole runes.
	long := errorString(strings.Repeat("é", maxNACKBytes))
	for _, errs := range [][]error{{long}, {long, errTest}} {
		msg := nackError(errs).Error()
		if len(msg) > maxNACKBytes || !utf8.ValidString(msg) || !strings.Contains(msg, "éé… (cut)") {
			t.Fatalf("NACK of %d errors, the first %d bytes: %d bytes, valid UTF-8 %v, ends %q",
				len(errs), len(long), len(msg), utf8.ValidString(msg), msg[max(0, len(msg)-40):])
		}
		if len(errs) == 2 && !strings.HasSuffix(msg, "; and 1 more error") {
			t.Fatalf("NACK ends %q, want it to count the error left out", msg[len(msg)-40:])
		}
	}
}

var errTest = errorString("bad resource")

type errorString string

func (e errorString) Error() string { return string(e) }

// Delta resources carry aliases; a subscription made under an alias (VHDS
// subscribes as "route-config/domain") gets the resource, and loses it when
// the canonical name is removed.
func TestDeltaAliasesResolveToTheirSubscription(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(partialType, "rc/foo.com")
	aliased := func(payload string) *discoveryv3.Resource {
		r := wrapped("rc/vh1", "v-"+payload, 0, rc("rc/vh1", payload))
		r.Aliases = []string{"rc/foo.com"}
		return r
	}
	if err := h.delta(resources.RouteConfigTypeURL, nil, aliased("a")); err != nil {
		t.Fatal(err)
	}
	w["rc/foo.com"].wantUpdate(t, "rc/vh1", "a")
	if err := h.delta(resources.RouteConfigTypeURL, nil, aliased("a")); err != nil {
		t.Fatal(err)
	}
	w["rc/foo.com"].none(t) // same bytes: not delivered again
	if err := h.delta(resources.RouteConfigTypeURL, nil, aliased("b")); err != nil {
		t.Fatal(err)
	}
	w["rc/foo.com"].wantUpdate(t, "rc/vh1", "b")
	if err := h.delta(resources.RouteConfigTypeURL, []string{"rc/vh1"}); err != nil {
		t.Fatal(err)
	}
	w["rc/foo.com"].wantError(t, "resource-error", ErrResourceNotFound)
}
