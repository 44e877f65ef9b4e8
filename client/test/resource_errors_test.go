package test

import (
	"errors"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Errors the server reports per resource (DiscoveryResponse.resource_errors,
// gRFC A88), on both protocols: who is told what, what the cache keeps, and
// that such a response is ACKed like any other.

// rerr is a resource error for name.
func rerr(name string, code codes.Code, msg string) *discoveryv3.ResourceError {
	return &discoveryv3.ResourceError{
		ResourceName: &discoveryv3.ResourceName{Name: name},
		ErrorDetail:  &statuspb.Status{Code: int32(code), Message: msg},
	}
}

// respondWithErrors sends one Listener response in p's form, of the given
// listeners (each named by its route config "R-"+name) and resource
// errors, from control plane "cp-1", and checks that the client ACKs it.
// SotW versions are "v"+nonce.
func (e *fakeEnv) respondWithErrors(p protocol, nonce string, listeners []string, errs ...*discoveryv3.ResourceError) {
	e.t.Helper()
	e.respondFrom(p, "cp-1", nonce, listeners, errs...)
}

// respondFrom is respondWithErrors from the control plane identified as
// controlPlane.
func (e *fakeEnv) respondFrom(p protocol, controlPlane, nonce string, listeners []string, errs ...*discoveryv3.ResourceError) {
	e.t.Helper()
	cp := &corev3.ControlPlane{Identifier: controlPlane}
	if p.delta {
		resp := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: ldsURL, Nonce: nonce, SystemVersionInfo: "v" + nonce, ResourceErrors: errs, ControlPlane: cp}
		for _, l := range listeners {
			resp.Resources = append(resp.Resources, res(l, "v"+nonce, testutils.Listener(l, "R-"+l)))
		}
		e.sendDelta(resp)
		// An ACK, not a NACK: the errors are the server's word, not a
		// fault of the response.
		wantReq(e.t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: ldsURL, ResponseNonce: nonce})
		return
	}
	var msgs []proto.Message
	for _, l := range listeners {
		msgs = append(msgs, testutils.Listener(l, "R-"+l))
	}
	resp := testutils.SotWResponse(ldsURL, "v"+nonce, nonce, msgs...)
	resp.ResourceErrors, resp.ControlPlane = errs, cp
	e.send(resp)
	wantReq(e.t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, VersionInfo: "v" + nonce, ResourceNames: []string{"L1"}, ResponseNonce: nonce})
}

// listenerEnv is a client of the fake server watching Listener L1, whose
// first request has been read.
func listenerEnv(t *testing.T, p protocol, cfg config) (*fakeEnv, *recorder[*resources.Listener]) {
	t.Helper()
	e := newFakeEnv(t, p, cfg)
	w := newRecorder[*resources.Listener]()
	client.WatchListener(e.c, "L1", w)
	e.reply(p)
	return e, w
}

// wantServerError checks that ev is an error of kind reporting the server's
// code and message.
func wantServerError(t *testing.T, ev event[*resources.Listener], kind string, code codes.Code, msg string) {
	t.Helper()
	var se *client.ServerReportedError
	if ev.kind != kind || !errors.Is(ev.err, client.ErrReportedByServer) || !errors.As(ev.err, &se) {
		t.Fatalf("got %v, want %s(%v)", ev, kind, client.ErrReportedByServer)
	}
	if se.Code != code || se.Message != msg {
		t.Fatalf("server error %v, want %v %q", se, code, msg)
	}
}

// Nothing held: the watcher gets a resource error with the server's code
// and message, the does-not-exist timer stops (the server has answered for
// the name), and the resource still arrives later.
func TestServerErrorWithoutDataIsResourceError(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
		e, w := listenerEnv(t, p, config{expiry: expiry, clock: clk})
		waitTimers(t, clk, 1)
		e.respondWithErrors(p, "1", nil, rerr("L1", codes.PermissionDenied, "not for you"))
		wantServerError(t, w.next(t), "resource-error", codes.PermissionDenied, "not for you")
		st, _ := status(e.c, ldsURL, "L1")
		if st.Status != client.StatusReceivedError || !errors.Is(st.Err, client.ErrReportedByServer) || st.Value != nil || st.ControlPlane != "cp-1" {
			t.Fatalf("dump %+v, want RECEIVED_ERROR, the server's error, no value, control plane cp-1", st)
		}
		wantCacheState(t, e.c, "received_error")
		clk.Advance(expiry)
		barrier(t, e.c)
		w.none(t)

		e.respondWithErrors(p, "2", []string{"L1"})
		w.wantUpdate(t, "L1")
		if st, _ := status(e.c, ldsURL, "L1"); st.Status != client.StatusACKed || st.Err != nil {
			t.Fatalf("dump %+v, want ACKED without error", st)
		}
	})
}

// Data held: the error is ambient and the data stays, NOT_FOUND included
// (it also matches ErrResourceNotFound). A SotW Listener response that
// lists L1 only in resource_errors does not delete it by omission. A
// watcher that comes later gets the data, then the error; the resource sent
// again clears the error.
func TestServerErrorWithDataIsAmbient(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e, w := listenerEnv(t, p, config{})
		e.respondWithErrors(p, "1", []string{"L1"})
		w.wantUpdate(t, "L1")

		e.respondWithErrors(p, "2", nil, rerr("L1", codes.NotFound, "gone for now"))
		ev := w.next(t)
		wantServerError(t, ev, "ambient-error", codes.NotFound, "gone for now")
		if !errors.Is(ev.err, client.ErrResourceNotFound) {
			t.Fatalf("%v does not match ErrResourceNotFound", ev.err)
		}
		st, _ := status(e.c, ldsURL, "L1")
		if st.Status != client.StatusReceivedError || st.Value == nil || st.Version != "v1" {
			t.Fatalf("dump %+v, want RECEIVED_ERROR still holding v1", st)
		}
		wantCacheState(t, e.c, "received_error_but_cached")

		// The same error again (SotW servers may repeat theirs in every
		// response): ACKed, and nobody is told twice.
		e.respondWithErrors(p, "2b", nil, rerr("L1", codes.NotFound, "gone for now"))
		barrier(t, e.c)
		w.none(t)

		late := newRecorder[*resources.Listener]()
		client.WatchListener(e.c, "L1", late)
		late.wantUpdate(t, "L1")
		wantServerError(t, late.next(t), "ambient-error", codes.NotFound, "gone for now")

		// The same listener again: no new update (its bytes are those held),
		// but the error is over.
		e.respondWithErrors(p, "3", []string{"L1"})
		barrier(t, e.c)
		w.none(t)
		if st, _ := status(e.c, ldsURL, "L1"); st.Status != client.StatusACKed || st.Err != nil {
			t.Fatalf("dump %+v, want ACKED without error", st)
		}
	})
}

// fail_on_data_errors: NOT_FOUND and PERMISSION_DENIED drop what is held and
// are resource errors; other codes are transient and keep the data.
func TestServerErrorFailOnDataErrors(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e, w := listenerEnv(t, p, config{features: []string{bootstrap.FeatureFailOnDataErrors}})
		e.respondWithErrors(p, "1", []string{"L1"})
		w.wantUpdate(t, "L1")

		e.respondWithErrors(p, "2", nil, rerr("L1", codes.Unavailable, "overloaded"))
		wantServerError(t, w.next(t), "ambient-error", codes.Unavailable, "overloaded")
		if st, _ := status(e.c, ldsURL, "L1"); st.Status != client.StatusReceivedError || st.Value == nil {
			t.Fatalf("dump %+v, want RECEIVED_ERROR still holding the value", st)
		}

		e.respondWithErrors(p, "3", nil, rerr("L1", codes.PermissionDenied, "revoked"))
		wantServerError(t, w.next(t), "resource-error", codes.PermissionDenied, "revoked")
		if st, _ := status(e.c, ldsURL, "L1"); st.Status != client.StatusReceivedError || st.Value != nil || st.Version != "" {
			t.Fatalf("dump %+v, want RECEIVED_ERROR with the value dropped", st)
		}

		// The same bytes as before the drop are new again.
		e.respondWithErrors(p, "4", []string{"L1"})
		w.wantUpdate(t, "L1")
	})
}

// gRFC A88's resource timer feature (resource_timer_is_transient_error,
// or grpc-java's resource_timer_is_transient_failure): the timer runs twice
// the configured expiry, and its expiry is a resource error saying the
// server is slow (ErrServerUnavailable), not that the resource does not
// exist; the dump says TIMEOUT.
func TestResourceTimerIsTransientFailure(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		for _, feature := range []string{bootstrap.FeatureResourceTimerIsTransientError, bootstrap.FeatureResourceTimerIsTransientFailure} {
			t.Run(feature, func(t *testing.T) {
				t.Parallel()
				clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
				e, w := listenerEnv(t, p, config{expiry: expiry, clock: clk, features: []string{feature}})
				waitTimers(t, clk, 1)
				clk.Advance(2*expiry - time.Nanosecond)
				barrier(t, e.c)
				w.none(t)
				clk.Advance(time.Nanosecond)
				ev := w.wantError(t, "resource-error", client.ErrServerUnavailable, "L1")
				if errors.Is(ev.err, client.ErrResourceNotFound) {
					t.Fatalf("%v matches ErrResourceNotFound, want a transient error", ev.err)
				}
				if st, _ := status(e.c, ldsURL, "L1"); st.Status != client.StatusTimeout || st.Err == nil {
					t.Fatalf("dump %+v, want TIMEOUT with its error", st)
				}
				wantCacheState(t, e.c, "timeout")
				late := newRecorder[*resources.Listener]()
				client.WatchListener(e.c, "L1", late)
				late.wantError(t, "resource-error", client.ErrServerUnavailable, "L1")

				e.respondWithErrors(p, "1", []string{"L1"})
				w.wantUpdate(t, "L1")
			})
		}
	})
}

// The control plane's identifier is logged when a server first gives it and
// when it changes (another instance behind the address), not on every
// response, and the dump shows the latest.
func TestControlPlaneIdentifierLoggedAndDumped(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		logger, sink := newCaptureLogger()
		e, w := listenerEnv(t, p, config{logger: logger})
		// The client logs before it answers: once the reply is read, the
		// line is there.
		e.respondFrom(p, "cp-1", "1", []string{"L1"})
		w.wantUpdate(t, "L1")
		e.respondFrom(p, "cp-1", "2", []string{"L1"})
		e.respondFrom(p, "cp-2", "3", []string{"L1"})
		var got []string
		for _, r := range sink.all() {
			if r.msg == controlPlaneMsg {
				if r.attrs["server"] != e.fs.Address() {
					t.Errorf("line %v does not name the server %s", r, e.fs.Address())
				}
				got = append(got, r.attrs["control_plane"])
			}
		}
		if len(got) != 2 || got[0] != "cp-1" || got[1] != "cp-2" {
			t.Fatalf("control planes logged: %q, want [cp-1 cp-2]", got)
		}
		if st, _ := status(e.c, ldsURL, "L1"); st.ControlPlane != "cp-2" {
			t.Fatalf("dump says control plane %q, want cp-2", st.ControlPlane)
		}
	})
}

// controlPlaneMsg is the log line naming a server's control plane.
const controlPlaneMsg = "control plane identified"

// wantCacheState checks that the client's one Listener is counted in the
// cache state of gRFC A78/A88 state.
func wantCacheState(t *testing.T, c *client.Client, state string) {
	t.Helper()
	counts := c.ResourceCounts()
	if len(counts) != 1 || counts[0].TypeURL != ldsURL || counts[0].CacheState != state || counts[0].Count != 1 {
		t.Fatalf("resource counts %+v, want one Listener %s", counts, state)
	}
}
