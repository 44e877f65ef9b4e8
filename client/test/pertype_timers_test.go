package test

import (
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// sendListenerOn sends Listener name at version as the one resource of a
// response on st, SotW or delta.
func sendListenerOn(t *testing.T, st *testutils.FakeStream, name, version, nonce string) {
	t.Helper()
	l := testutils.Listener(name, "R1")
	var err error
	if st.Delta {
		err = st.SendDelta(testutils.DeltaResponse(ldsURL, nonce, nil, testutils.WrapResource(name, version, 0, l)))
	} else {
		err = st.Send(testutils.SotWResponse(ldsURL, version, nonce, l))
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Per-type streams follow the timer rules of ADS (gRFC A57): a stream lost
// after it answered stops the does-not-exist timers of its names, which
// start again when the names are sent on the new stream; the loss itself is
// routine, and no watcher hears of it. L2's timer is half run (on the fake
// clock) when its stream is cut; half a timeout later it must not have
// fired, a whole one after the resend it must. Before, the loss was
// swallowed and the timer ran through the reconnect: L2 was declared
// missing half a timeout after the cut.
func TestPerTypeStreamLossRestartsTimers(t *testing.T) {
	forEachProtocol(t, []protocol{sotwPerType, deltaPerType}, func(t *testing.T, p protocol) {
		t.Parallel()
		e, clk := newClockedEnv(t, p)
		w1, w2 := newRecorder[*resources.Listener](), newRecorder[*resources.Listener]()
		client.WatchListener(e.c, "L1", w1)
		lds := e.nextStream()
		readReq(t, lds)
		sendListenerOn(t, lds, "L1", "1", "n1")
		wantACK(t, lds, "n1")
		w1.wantUpdate(t, "L1")

		client.WatchListener(e.c, "L2", w2)
		readReq(t, lds)
		waitTimers(t, clk, 1) // L2's
		clk.Advance(expiry / 2)
		lds.Cut(grpcstatus.Error(codes.Unavailable, "rebalancing"))
		// The stream's end was handled before the new stream started, so
		// once the names are on it the timer running is the new one.
		readReq(t, e.nextStream())
		waitTimers(t, clk, 1)

		clk.Advance(expiry / 2)
		barrier(t, e.c)
		w2.none(t) // the old timer would have fired here
		clk.Advance(expiry / 2)
		w2.wantNotFound(t, "L2")
		barrier(t, e.c)
		w1.none(t) // the routine loss was not reported to anyone
		w2.none(t)
	})
}

// Two per-type streams that both answered, lost one after the other: each
// loss is routine, whatever the first's end did to the server's health.
// Nobody is told of either.
func TestPerTypeRoutineLossesOfTwoStreams(t *testing.T) {
	forEachProtocol(t, []protocol{sotwPerType, deltaPerType}, func(t *testing.T, p protocol) {
		t.Parallel()
		e, wl, wc, lds, cds := listenerAndClusterStreams(t, p)

		lds.Cut(grpcstatus.Error(codes.Unavailable, "rebalancing"))
		readReq(t, e.nextStream())
		cds.Cut(grpcstatus.Error(codes.Unavailable, "rebalancing"))
		readReq(t, e.nextStream())
		barrier(t, e.c)
		wl.none(t)
		wc.none(t)
	})
}

// The server goes away with both per-type streams: every watcher, of
// either stream's type, is told once that the server is unavailable, and
// keeps its value, as over ADS.
func TestPerTypeServerGoneTellsEveryWatcher(t *testing.T) {
	forEachProtocol(t, []protocol{sotwPerType, deltaPerType}, func(t *testing.T, p protocol) {
		t.Parallel()
		e, wl, wc, _, _ := listenerAndClusterStreams(t, p)

		e.fs.Stop()
		wl.wantError(t, "ambient-error", client.ErrServerUnavailable, "L1")
		wc.wantError(t, "ambient-error", client.ErrServerUnavailable, "C1")
		barrier(t, e.c)
		wl.none(t)
		wc.none(t)
	})
}

// listenerAndClusterStreams is a client of a per-type server holding
// Listener L1 and Cluster C1, each received and ACKed on its own stream.
func listenerAndClusterStreams(t *testing.T, p protocol) (e *fakeEnv, wl *recorder[*resources.Listener], wc *recorder[*resources.Cluster], lds, cds *testutils.FakeStream) {
	t.Helper()
	e = newFakeEnv(t, p, config{})
	wl, wc = newRecorder[*resources.Listener](), newRecorder[*resources.Cluster]()
	client.WatchListener(e.c, "L1", wl)
	lds = e.nextStream()
	readReq(t, lds)
	sendListenerOn(t, lds, "L1", "1", "n1")
	wantACK(t, lds, "n1")
	wl.wantUpdate(t, "L1")
	client.WatchCluster(e.c, "C1", wc)
	cds = e.nextStream()
	readReq(t, cds)
	mustSendCluster(t, cds, "1", "c1", testutils.Cluster("C1", ""))
	wantACK(t, cds, "c1")
	wc.wantUpdate(t, "C1")
	return e, wl, wc, lds, cds
}
