package watchers_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// A lost connection is one AmbientError, whatever the number of resources,
// and the snapshot stays in force; after reconnecting, changes flow again.
func TestOutage(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		res := fullTree()
		e.update(res)
		r, _ := e.watch("svc", watchers.TreeOptions{})
		r.nextUpdate()

		addr := e.ms.Address()
		e.ms.Stop()
		ev := r.next()
		if ev.ambErr == nil || !errors.Is(ev.ambErr, client.ErrServerUnavailable) {
			t.Fatalf("got %v, want AmbientError wrapping ErrServerUnavailable", ev)
		}

		// The new server has its resources before it serves (see
		// ManagementServerOptions.Initial).
		subs := newSubsLog()
		res.Endpoints[0] = testutils.ClusterLoadAssignment("a", "10.0.0.9", 80)
		ms, err := testutils.StartManagementServer(subs.hooks(testutils.ManagementServerOptions{Address: addr, Linear: v.linear, ADS: v.adsCache,
			Initial: map[string]testutils.Resources{nodeID: res}}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ms.Stop)
		e.ms = ms
		s := r.nextUpdate() // no second AmbientError before it
		if got := describeCluster(s.Clusters.Get("a")); got != "a:eds(a)[10.0.0.9:80]" {
			t.Errorf("after reconnecting: a is %s", got)
		}
	})
}

// A connection lost in the middle of a change does not break the snapshot
// in force: the cluster the new route needs, which the client cannot get
// for now, holds up the next snapshot instead of appearing as an error.
// Once the client is back, the change completes.
func TestOutageDuringSwitch(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fs.Stop)
		c := newClient(t, fs.Address(), v, longExpiry)
		r := newRecorder(t)
		t.Cleanup(watchers.WatchConfigTree(c, "svc", watchers.TreeOptions{}, r))
		delta := v.apiType == testutils.APITypeDelta

		fc := serveSimpleTree(t, fs, delta, r)

		// The route moves to b; the stream breaks once b is asked for,
		// and the next one fails before answering: an outage (a stream
		// that ends after answering is routine, and nobody is told).
		fc.sendAndWaitACK(rdsURL, "n4", []proto.Message{testutils.RouteConfig("svc-route", "*", "b")})
		fc.waitSubscribed(map[string]int{cdsURL: 2})
		lost := status.Error(codes.Unavailable, "test: connection lost")
		fc.st.Cut(lost)
		fc = newFakeClient(t, fs, delta)
		fc.st.Cut(lost)
		ev := r.next()
		if ev.ambErr == nil || !errors.Is(ev.ambErr, client.ErrServerUnavailable) {
			t.Fatalf("got %v, want AmbientError wrapping ErrServerUnavailable", ev)
		}

		// Back on a new stream, the client asks again for what it lacks.
		fc = newFakeClient(t, fs, delta)
		fc.waitSubscribed(map[string]int{cdsURL: 1})
		barrier(t, c)
		r.noMore() // b, which the client could not get, did not break the tree
		fc.sendAndWaitACK(cdsURL, "m1", []proto.Message{testutils.Cluster("a", ""), testutils.Cluster("b", "")})
		fc.waitSubscribed(map[string]int{edsURL: 2}) // a again, and b
		fc.sendAndWaitACK(edsURL, "m2", []proto.Message{
			testutils.ClusterLoadAssignment("a", "127.0.0.1", 1),
			testutils.ClusterLoadAssignment("b", "127.0.0.1", 2),
		})
		if got := describe(r.nextUpdate()); got != "svc/svc-route b:eds(b)[127.0.0.1:2]" {
			t.Errorf("snapshot after reconnecting: %s", got)
		}
		barrier(t, c)
		r.noMore()
	})
}

// serveSimpleTree answers the client on the next stream of fs with
// svc → svc-route → a → 127.0.0.1:1, one type at a time, and waits for the
// snapshot.
func serveSimpleTree(t *testing.T, fs *testutils.FakeServer, delta bool, r *recorder) *fakeClient {
	t.Helper()
	fc := newFakeClient(t, fs, delta)
	steps := []struct {
		typeURL string
		msg     proto.Message
	}{
		{ldsURL, testutils.Listener("svc", "svc-route")},
		{rdsURL, testutils.RouteConfig("svc-route", "*", "a")},
		{cdsURL, testutils.Cluster("a", "")},
		{edsURL, testutils.ClusterLoadAssignment("a", "127.0.0.1", 1)},
	}
	for i, s := range steps {
		fc.waitSubscribed(map[string]int{s.typeURL: 1})
		fc.sendAndWaitACK(s.typeURL, fmt.Sprintf("n%d", i), []proto.Message{s.msg})
	}
	if got := describe(r.nextUpdate()); got != "svc/svc-route a:eds(a)[127.0.0.1:1]" {
		t.Fatalf("first snapshot %s", got)
	}
	return fc
}

// Two outages are two AmbientErrors, even when the server answered in
// between with nothing new for the tree.
func TestTwoOutages(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fs.Stop)
		c := newClient(t, fs.Address(), v, longExpiry)
		r := newRecorder(t)
		t.Cleanup(watchers.WatchConfigTree(c, "svc", watchers.TreeOptions{}, r))
		delta := v.apiType == testutils.APITypeDelta
		fc := serveSimpleTree(t, fs, delta, r)

		lost := status.Error(codes.Unavailable, "test: connection lost")
		for i := range 2 {
			// A stream cut after answering is routine; the next one
			// failing without an answer is an outage.
			fc.st.Cut(lost)
			fc = newFakeClient(t, fs, delta)
			fc.st.Cut(lost)
			ev := r.next()
			if ev.ambErr == nil || !errors.Is(ev.ambErr, client.ErrServerUnavailable) {
				t.Fatalf("outage %d: got %v, want AmbientError wrapping ErrServerUnavailable", i+1, ev)
			}
			// Back: the server answers with what the client has.
			fc = newFakeClient(t, fs, delta)
			fc.waitSubscribed(map[string]int{ldsURL: 1})
			fc.sendAndWaitACK(ldsURL, fmt.Sprintf("again-%d", i), []proto.Message{testutils.Listener("svc", "svc-route")})
			barrier(t, c)
			r.noMore()
		}
	})
}
