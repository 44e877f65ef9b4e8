package httpxds_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

// outlierEnv is a client whose cluster "c" has bad, answering status
// (answer, if not nil, instead), and a good backend, round robin, with od as its outlier_detection; on a
// fake clock that never moves, so that no interval ends: only a
// consecutive detector can eject.
func outlierEnv(t *testing.T, status int, answer http.HandlerFunc, od *clusterv3.OutlierDetection) (e *cenv, bad, good *backend) {
	clock := testutils.NewFakeClock(time.Unix(1000, 0))
	e = newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) { o.Clock = clock }})
	bad, good = newBackend(t, "bad"), newBackend(t, "good")
	bad.handler = func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad", status) }
	if answer != nil {
		bad.handler = answer
	}
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {bad, good}})
	res.Clusters[0].OutlierDetection = od
	e.update(res)
	return e, bad, good
}

// Envoy's consecutive_5xx
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier),
// on by default for an HTTP cluster with outlier_detection (5 in a row,
// enforced 100%): the endpoint answering 500 is ejected the moment its
// fifth 500 ends, with no interval, and the other serves the rest.
func TestClientConsecutive5xx(t *testing.T) {
	e, bad, good := outlierEnv(t, http.StatusInternalServerError, nil, &clusterv3.OutlierDetection{
		EnforcingSuccessRate: wrapperspb.UInt32(0),
		MaxEjectionPercent:   wrapperspb.UInt32(50),
	})
	for range 30 {
		e.get("/x")
	}
	if bad.count() != 5 || good.count() != 25 {
		t.Errorf("bad served %d requests, good %d; want 5 (then ejected) and 25", bad.count(), good.count())
	}
}

// consecutive_gateway_failure counts 502, 503 and 504, but ejects only
// with enforcing_consecutive_gateway_failure set (Envoy's default is 0).
// consecutive_5xx, which counts them too, is set past the test's reach.
func TestClientConsecutiveGatewayFailure(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		enforcing *wrapperspb.UInt32Value
		wantBad   int
	}{
		{"502 unenforced by default", http.StatusBadGateway, nil, 15},
		{"502 enforced", http.StatusBadGateway, wrapperspb.UInt32(100), 5},
		{"503 enforced", http.StatusServiceUnavailable, wrapperspb.UInt32(100), 5},
		{"500 is no gateway failure", http.StatusInternalServerError, wrapperspb.UInt32(100), 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, bad, good := outlierEnv(t, tc.status, nil, &clusterv3.OutlierDetection{
				EnforcingSuccessRate:               wrapperspb.UInt32(0),
				MaxEjectionPercent:                 wrapperspb.UInt32(50),
				Consecutive_5Xx:                    wrapperspb.UInt32(1000),
				EnforcingConsecutiveGatewayFailure: tc.enforcing,
			})
			for range 30 {
				e.get("/x")
			}
			if bad.count() != tc.wantBad || good.count() != 30-tc.wantBad {
				t.Errorf("bad (answering %d) served %d requests, good %d; want %d and %d",
					tc.status, bad.count(), good.count(), tc.wantBad, 30-tc.wantBad)
			}
		})
	}
}

// A request the endpoint never answers (here: the connection closed on
// it) is a gateway failure too, as Envoy counts a locally originated
// error without split_external_local_origin_errors: five in a row eject
// the endpoint when consecutive_gateway_failure is enforced.
func TestClientConsecutiveConnectionFailures(t *testing.T) {
	hangUp := func(w http.ResponseWriter, r *http.Request) {
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	}
	e, _, _ := outlierEnv(t, 0, hangUp, &clusterv3.OutlierDetection{
		EnforcingSuccessRate:               wrapperspb.UInt32(0),
		MaxEjectionPercent:                 wrapperspb.UInt32(50),
		Consecutive_5Xx:                    wrapperspb.UInt32(1000),
		EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(100),
	})
	failed := unanswered(t, e, 30)
	if failed != 5 {
		t.Errorf("%d requests failed, want 5 (then the endpoint ejected)", failed)
	}
}

// Envoy's split_external_local_origin_errors
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier#detection-types):
// with it, a request the endpoint never answers is a locally originated
// error, which consecutive_gateway_failure ignores ("in split mode ...
// only gateway errors") and consecutive_local_origin_failure (default 5,
// enforced 100%) counts; without it, it is a gateway failure.
func TestClientLocalOriginSplit(t *testing.T) {
	hangUp := func(w http.ResponseWriter, r *http.Request) {
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	}
	for _, tc := range []struct {
		name       string
		split      bool
		localRun   *wrapperspb.UInt32Value
		wantFailed int
	}{
		{"unsplit: a gateway failure", false, wrapperspb.UInt32(2), 3},
		{"split: not a gateway failure, local run off", true, wrapperspb.UInt32(0), 15},
		{"split: consecutive_local_origin_failure", true, wrapperspb.UInt32(4), 4},
		{"split: consecutive_local_origin_failure's default", true, nil, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _, _ := outlierEnv(t, 0, hangUp, &clusterv3.OutlierDetection{
				EnforcingSuccessRate:               wrapperspb.UInt32(0),
				MaxEjectionPercent:                 wrapperspb.UInt32(50),
				Consecutive_5Xx:                    wrapperspb.UInt32(1000),
				ConsecutiveGatewayFailure:          wrapperspb.UInt32(3),
				EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(100),
				SplitExternalLocalOriginErrors:     tc.split,
				ConsecutiveLocalOriginFailure:      tc.localRun,
			})
			failed := unanswered(t, e, 30)
			if failed != tc.wantFailed {
				t.Errorf("%d requests failed, want %d", failed, tc.wantFailed)
			}
		})
	}
}

// The failure percentage counts the requests an endpoint never answered
// with its 5xx by default; with split_external_local_origin_errors it
// judges them apart, at enforcing_failure_percentage_local_origin, the
// responses at enforcing_failure_percentage
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier#failure-percentage).
func TestClientLocalOriginFailurePercentage(t *testing.T) {
	for _, tc := range []struct {
		name        string
		split       bool
		localEnf    uint32
		wantEjected bool
	}{
		{"unsplit: one bucket", false, 0, true},
		{"split: local enforcing 0", true, 0, false},
		{"split: local enforcing 100", true, 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testutils.NewFakeClock(time.Unix(1000, 0))
			e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) { o.Clock = clock }})
			bad, good := newBackend(t, "bad"), newBackend(t, "good")
			bad.handler = func(w http.ResponseWriter, r *http.Request) {
				if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
					c.Close()
				}
			}
			res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {bad, good}})
			od := failurePercentage()
			od.EnforcingLocalOriginSuccessRate = wrapperspb.UInt32(0)
			od.EnforcingConsecutive_5Xx = wrapperspb.UInt32(0)
			od.ConsecutiveLocalOriginFailure = wrapperspb.UInt32(0)
			od.SplitExternalLocalOriginErrors = tc.split
			od.EnforcingFailurePercentageLocalOrigin = wrapperspb.UInt32(tc.localEnf)
			res.Clusters[0].OutlierDetection = od
			e.update(res)
			send := func() (failed int) {
				for range 20 {
					req, err := http.NewRequest(http.MethodGet, "http://"+svcHost+"/x", nil)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := e.do(req); err != nil {
						failed++
					}
				}
				return failed
			}
			if n := send(); n != 10 {
				t.Fatalf("round robin: %d of 20 requests failed, want 10", n)
			}
			clock.Advance(10 * time.Second)
			if n, want := send(), map[bool]int{true: 0, false: 10}[tc.wantEjected]; n != want {
				t.Errorf("after the interval %d of 20 requests failed, want %d (bad ejected: %v)", n, want, tc.wantEjected)
			}
		})
	}
}

// A request its caller cancels says nothing of the endpoint: Envoy's
// router resets the upstream request when the downstream goes away and
// records no outlier result for it (source/common/router/router.cc,
// Filter::onDestroy, unlike its timeouts), so twenty cancelled requests
// in a row do not eject the endpoint, whether cancelled before the
// response (consecutive_gateway_failure enforced, which counts the
// requests an endpoint never answered) or while its body is read
// (failure_percentage at the end of an interval).
func TestClientCallerCancelDoesNotEject(t *testing.T) {
	for _, tc := range []struct {
		name string
		// headers: bad answers its headers before it blocks, and
		// the caller cancels while reading the body.
		headers bool
	}{
		{"before the response", false},
		{"during the body", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived := make(chan struct{}, 1)
			release := make(chan struct{})
			blocked := func(w http.ResponseWriter, r *http.Request) {
				if tc.headers {
					w.WriteHeader(http.StatusOK)
					w.Write([]byte("partial"))
					http.NewResponseController(w).Flush()
				}
				arrived <- struct{}{}
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}
			clock := testutils.NewFakeClock(time.Unix(1000, 0))
			e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) { o.Clock = clock }})
			bad, good := newBackend(t, "bad"), newBackend(t, "good")
			t.Cleanup(func() { close(release) }) // before the servers close
			bad.handler = blocked
			res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {bad, good}})
			res.Clusters[0].OutlierDetection = &clusterv3.OutlierDetection{
				Interval:                           durationpb.New(10 * time.Second),
				BaseEjectionTime:                   durationpb.New(time.Minute),
				MaxEjectionPercent:                 wrapperspb.UInt32(50),
				EnforcingSuccessRate:               wrapperspb.UInt32(0),
				Consecutive_5Xx:                    wrapperspb.UInt32(5),
				ConsecutiveGatewayFailure:          wrapperspb.UInt32(5),
				EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(100),
				FailurePercentageThreshold:         wrapperspb.UInt32(50),
				EnforcingFailurePercentage:         wrapperspb.UInt32(100),
				FailurePercentageMinimumHosts:      wrapperspb.UInt32(1),
				FailurePercentageRequestVolume:     wrapperspb.UInt32(5),
			}
			e.update(res)
			// send sends n requests, cancelling each that reaches bad,
			// and returns how many did.
			send := func(n int) (cancelled int) {
				for range n {
					ctx, cancel := context.WithCancel(e.ctx)
					done := make(chan error, 1)
					reading := make(chan struct{}, 1)
					go func() {
						req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+svcHost+"/x", nil)
						if err != nil {
							done <- err
							return
						}
						resp, err := e.hc.Do(req)
						if err == nil {
							// bad's first bytes: the response is in, its
							// body being read.
							head := make([]byte, len("partial"))
							if _, err = io.ReadFull(resp.Body, head); err == nil && string(head) == "partial" {
								reading <- struct{}{}
							}
							if err == nil {
								_, err = io.ReadAll(resp.Body)
							}
							resp.Body.Close()
						}
						done <- err
					}()
					select {
					case err := <-done:
						if err != nil {
							t.Fatalf("a request to good: %v", err)
						}
					case <-arrived:
						if tc.headers {
							<-reading // cancel while the body is read
						}
						cancel()
						if err := <-done; !errors.Is(err, context.Canceled) {
							t.Fatalf("a request to bad, cancelled: %v, want context.Canceled", err)
						}
						cancelled++
					case <-e.ctx.Done():
						t.Fatal("test timed out")
					}
					cancel()
				}
				return cancelled
			}
			if got := send(20); got != 10 {
				t.Fatalf("%d of 20 requests reached bad and were cancelled, want 10 (round robin, bad never ejected)", got)
			}
			clock.Advance(10 * time.Second) // the interval ends: failure_percentage judges
			if got := send(20); got != 10 {
				t.Errorf("after the interval %d of 20 requests reached bad, want 10 (bad not ejected)", got)
			}
		})
	}
}
