package test

import (
	"testing"
	"time"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Subscription rules shared by both protocols.

// A type whose every name was cancelled while no stream was up sends
// nothing on the stream that then comes up: a type's first request names
// nothing only when the wildcard is wanted, since the server reads it as
// the legacy wildcard. The
// connection is held (black hole) until the watches are settled. (The same
// rule on a live stream, where the change races the sender, is tested in
// the transport package: TestSotWNoEmptyFirstRequest.)
func TestNoLegacyWildcardRequest(t *testing.T) {
	t.Parallel()
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			fs := startFake(t, "")
			fs.SetBlackhole(true)
			c := newClient(t, fs.Address(), p, config{})
			cancel := client.WatchCluster(c, "C1", newRecorder[*resources.Cluster]())
			barrier(t, c) // the subscription reached the transport
			cancel()
			w := newRecorder[*resources.Listener]()
			client.WatchListener(c, "L1", w)
			barrier(t, c)
			fs.SetBlackhole(false)

			e := &fakeEnv{t: t, fs: fs, c: c}
			e.reply(p)
			e.respond(p, ldsURL, "1", testutils.WrapResource("L1", "1", 0, testutils.Listener("L1", "R1")))
			e.reply(p)
			w.nextPastOutage(t)
			// Requests go out in one pass over the types: a Cluster request
			// would have preceded the ACK.
			for _, r := range fs.Requests() {
				if typeURL := r.SotW.GetTypeUrl() + r.Delta.GetTypeUrl(); typeURL != ldsURL {
					t.Fatalf("request of %s: %v, want Listener requests only", typeURL, r)
				}
			}
		})
	}
}

// The does-not-exist timeout defaults to the 15 s the protocol recommends.
func TestDefaultWatchExpiry(t *testing.T) {
	if client.DefaultWatchExpiry != 15*time.Second {
		t.Fatalf("DefaultWatchExpiry is %v, want 15s", client.DefaultWatchExpiry)
	}
}
