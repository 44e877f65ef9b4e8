package test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// ignoredMsg is the log line of a response of a type not subscribed to,
// which is ignored, unanswered.
const ignoredMsg = "ignoring a response of a type not subscribed to"

// perTypeAttrs are attributes of log lines about one resource type: a line
// that has one must say which type.
var perTypeAttrs = []string{"name", "version", "nonce", "hold", "request"}

// Every log line of the client and its transport names the server, and
// every line about one resource type names the type, by its URL, whichever
// layer writes it, so that one filter finds them all: those a NACK writes
// (a rejected resource, a response without a nonce), the one that ignores a
// response of a type nobody asked for, a does-not-exist expiry, and those of a stream failure.
func TestLogsNameServerAndType(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			logger, sink := newCaptureLogger()
			// The does-not-exist timer runs on a fake clock: with a short
			// real one, C1 itself could be reported missing on a slow run.
			clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
			g := newGarbageEnv(t, p, func(o *client.Options) {
				o.Logger = logger
				o.WatchExpiry = 100 * time.Millisecond
				o.Clock = clk
			})
			server := g.fs.Address()

			mustSendCluster(t, g.st, "2", "bad", badCluster("C1"))
			g.wantNACK(t, "bad", `"C1"`)
			g.send(t, "type.googleapis.com/goxds.test.Bogus", "bogus", []*anypb.Any{testutils.MarshalAny(testutils.Cluster("C1", ""))}, nameC1)
			g.send(t, cdsURL, "", []*anypb.Any{testutils.MarshalAny(testutils.Cluster("C1", ""))}, nameC1)
			g.wantNACK(t, "", "nonce")
			missing := newRecorder[*resources.Cluster]()
			client.WatchCluster(g.c, "C9", missing)
			waitTimers(t, clk, 1) // C9's: C1's stopped when C1 arrived
			clk.Advance(100 * time.Millisecond)
			missing.wantNotFound(t, "C9")
			g.fs.Stop()
			g.w.wantError(t, "ambient-error", client.ErrResourceInvalid, "C1")
			g.w.wantError(t, "ambient-error", client.ErrServerUnavailable, "C1")
			// The client logs the outage right after telling the watchers.
			waitFor(t, "the outage to be logged", func() bool {
				for _, r := range sink.all() {
					if r.msg == "management server unavailable" {
						return true
					}
				}
				return false
			})

			records := sink.all()
			seen := map[string]logRecord{}
			for _, r := range records {
				if got := r.attrs["server"]; got != server {
					t.Errorf("log line without the server (%s): %v", server, r)
				}
				for _, a := range perTypeAttrs {
					if _, ok := r.attrs[a]; ok && !strings.HasPrefix(r.attrs["type"], "type.googleapis.com/") {
						t.Errorf("log line about one type (it has %q) without its type URL: %v", a, r)
						break
					}
				}
				key := r.msg
				if r.msg == "NACK" || r.msg == ignoredMsg {
					key += " " + r.attrs["nonce"]
				}
				if _, ok := seen[key]; !ok {
					seen[key] = r
				}
			}
			for key, wantType := range map[string]string{
				"NACK bad":            cdsURL,
				ignoredMsg + " bogus": "type.googleapis.com/goxds.test.Bogus",
				"NACK ":               cdsURL,
			} {
				r, ok := seen[key]
				if !ok {
					t.Errorf("no %q line", key)
					continue
				}
				if r.attrs["type"] != wantType || (r.msg == "NACK" && r.attrs["err"] == "") {
					t.Errorf("%q line %v, want type %s and the error", key, r, wantType)
				}
			}
			for _, msg := range []string{"resource does not exist: not received in time", "xDS stream ended", "management server unavailable"} {
				if _, ok := seen[msg]; !ok {
					t.Errorf("no %q line", msg)
				}
			}
			if t.Failed() || testing.Verbose() {
				for _, r := range records {
					t.Log(r)
				}
			}
		})
	}
}
