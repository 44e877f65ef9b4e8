package test

import (
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// A client given no logger still reports a NACK and a lost server, as
// warnings to slog.Default(), looked up when the line is written: a program
// that calls slog.SetDefault after creating its client gets them too.
// Nothing below warning level goes there: requests, responses and the
// does-not-exist expiry stay quiet.
//
// Not parallel: it replaces the process's default logger, which no other
// test may see meanwhile. Go runs a package's parallel tests only once its
// sequential ones are done.
func TestLogsDefaultWarnings(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
			g := newGarbageEnv(t, p, func(o *client.Options) {
				o.Logger = nil
				o.WatchExpiry = 100 * time.Millisecond
				o.Clock = clk
			})
			logger, sink := newCaptureLogger()
			prev := slog.Default()
			slog.SetDefault(logger)
			t.Cleanup(func() { slog.SetDefault(prev) })

			mustSendCluster(t, g.st, "2", "bad", badCluster("C1"))
			g.wantNACK(t, "bad", `"C1"`)
			missing := newRecorder[*resources.Cluster]()
			client.WatchCluster(g.c, "C9", missing)
			waitTimers(t, clk, 1)
			clk.Advance(100 * time.Millisecond)
			missing.wantNotFound(t, "C9")
			g.fs.Stop()
			g.w.wantError(t, "ambient-error", client.ErrResourceInvalid, "C1")
			g.w.wantError(t, "ambient-error", client.ErrServerUnavailable, "C1")
			waitFor(t, "the outage to be logged", func() bool { return findLog(sink, outageMsg) != nil })

			for _, msg := range []string{"NACK", outageMsg} {
				r := findLog(sink, msg)
				if r == nil {
					t.Errorf("no %q line on the default logger", msg)
					continue
				}
				if r.attrs["server"] != g.fs.Address() {
					t.Errorf("%q line %v without the server %s", msg, r, g.fs.Address())
				}
			}
			for _, r := range sink.all() {
				if r.level < slog.LevelWarn {
					t.Errorf("line below warning level on the default logger: %v", r)
				}
			}
		})
	}
}

// With no logger, the end of an outage reaches slog.Default() as its
// beginning does: a user who saw the server go away sees it come back.
//
// Not parallel: it replaces the process's default logger.
func TestLogsDefaultOutageEnd(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			fs := startFake(t, "")
			c := newFaultClient(t, fs.Address(), p, func(o *client.Options) { o.Logger = nil })
			logger, sink := newCaptureLogger()
			prev := slog.Default()
			slog.SetDefault(logger)
			t.Cleanup(func() { slog.SetDefault(prev) })

			w, st := watchServedC1(t, c, fs, "n1")
			st.Cut(grpcstatus.Error(codes.Unavailable, "connection reset")) // answered: routine
			st2 := nextStreamOf(t, fs)
			readReq(t, st2)
			st2.Cut(grpcstatus.Error(codes.Unavailable, "connection refused")) // unanswered: an outage
			st3 := nextStreamOf(t, fs)
			readReq(t, st3)
			w.wantError(t, "ambient-error", client.ErrServerUnavailable, "C1")
			mustSendCluster(t, st3, "2", "n3", testutils.Cluster("C1", "eds-2"))
			wantACK(t, st3, "n3") // the recovery is logged before the ACK
			for _, msg := range []string{outageMsg, recoveryMsg} {
				r := findLog(sink, msg)
				if r == nil {
					t.Errorf("no %q line on the default logger", msg)
					continue
				}
				if r.attrs["server"] != fs.Address() {
					t.Errorf("%q line %v without the server %s", msg, r, fs.Address())
				}
			}
		})
	}
}
