package httpxds_test

import (
	"net/http"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

// pendingOutlier is an outlier_detection that ejects an endpoint at its
// fifth locally originated failure in a row (as gateway failures:
// split_external_local_origin_errors off), and at nothing else.
func pendingOutlier() *clusterv3.OutlierDetection {
	return &clusterv3.OutlierDetection{
		EnforcingSuccessRate:               wrapperspb.UInt32(0),
		MaxEjectionPercent:                 wrapperspb.UInt32(50),
		Consecutive_5Xx:                    wrapperspb.UInt32(1000),
		EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(100),
	}
}

// A request that waits for a connection to an endpoint (a pending
// request: its one connection busy, max_connections reached) and whose
// per-try timeout ends the wait never reached the endpoint: Envoy's
// outlier detection counts locally originated errors, events "which
// interrupted or prevented communication with the upstream host"
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier),
// and a wait in the client's own pool is none. Six such timeouts in a
// row leave the endpoint in the balancer's rotation.
func TestClientPendingTimeoutDoesNotEject(t *testing.T) {
	const perTry = time.Second
	clock := testutils.NewFakeClock(time.Unix(1000, 0))
	e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) { o.Clock = clock }})
	bad, good := newBackend(t, "bad"), newBackend(t, "good")
	entered, release := blocking(bad)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	// /hold has no per-try timeout; /x has one, and does not retry it.
	timed := toCluster(prefix("/x"), "c", func(ra *routev3.RouteAction) {
		ra.RetryPolicy = &routev3.RetryPolicy{RetryOn: "retriable-4xx", NumRetries: wrapperspb.UInt32(0), PerTryTimeout: durationpb.New(perTry)}
	})
	res := world(routes("rc", timed, toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {bad, good}})
	res.Clusters[0].CircuitBreakers = connLimits(1024, 1)
	res.Clusters[0].OutlierDetection = pendingOutlier()
	e.update(res)

	// Round robin: /hold requests until one is held at bad, on bad's
	// only connection; good has one too, so max_connections (1) is past.
	out := make(chan response, 1)
	for held := false; !held; {
		e.getAsync("/hold", out)
		select {
		case got := <-out:
			e.want(got, http.StatusOK, "")
		case <-entered:
			held = true
		case <-e.ctx.Done():
			t.Fatal("no /hold request reached bad")
		}
	}
	// The picks alternate from good: good answers, and bad's request
	// waits for a connection until its per-try timeout.
	for i := range 6 {
		e.want(e.get("/x"), http.StatusOK, "")
		e.getAsync("/x", out)
		if err := clock.WaitForTimerAt(e.ctx, clock.Now().Add(perTry)); err != nil {
			t.Fatalf("request %d to bad: no per-try timer: %v", i, err)
		}
		clock.Advance(perTry)
		if got := recv(t, e, out, "the pending request's end"); got.status == http.StatusOK {
			t.Fatalf("request %d to bad, pending past its per-try timeout: %d %q, want a timeout", i, got.status, got.body)
		}
	}
	close(release)
	released = true
	e.want(recv(t, e, out, "the held request's response"), http.StatusOK, "")
	before := bad.count()
	for range 10 {
		e.want(e.get("/hold"), http.StatusOK, "")
	}
	if n := bad.count() - before; n != 5 {
		t.Errorf("bad served %d of 10 requests after the pending requests' timeouts, want 5 (not ejected)", n)
	}
}

// A pending request whose connection cannot be made (refused) is the
// endpoint's locally originated failure: five in a row eject it.
func TestClientPendingConnectFailureEjects(t *testing.T) {
	clock := testutils.NewFakeClock(time.Unix(1000, 0))
	e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) { o.Clock = clock }})
	bad, good := newBackend(t, "bad"), newBackend(t, "good")
	bad.srv.Close() // its port refuses connections
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {bad, good}})
	res.Clusters[0].CircuitBreakers = connLimits(1024, 1)
	res.Clusters[0].OutlierDetection = pendingOutlier()
	e.update(res)
	if failed := unanswered(t, e, 30); failed != 5 {
		t.Errorf("%d requests failed, want 5 (then the endpoint ejected)", failed)
	}
}
