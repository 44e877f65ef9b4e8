package test

import (
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/testutils"
)

const (
	outageMsg   = "management server unavailable"
	recoveryMsg = "management server reachable again"
	responseMsg = "xDS response received"
)

// An outage is logged when it begins and when it ends: a warning when a
// stream fails without an answer, and one more warning when the server
// answers again, after the first, with the outage's length on the
// client's clock (a log of warnings only must show the end too). The first connection, and a stream
// that ends after answering, are no outage and log no recovery. Every
// response is logged at debug level with its type, version, nonce and
// counts, as requests are.
func TestLogsOutageEndAndResponses(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			checkLeaks(t)
			logger, sink := newCaptureLogger()
			fs := startFake(t, "")
			// The outage is measured on the client's clock: a fake one
			// makes its length exact.
			clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
			c := newFaultClient(t, fs.Address(), p, func(o *client.Options) {
				o.Logger = logger
				o.Clock = clk
			})
			// The response is logged before it is applied, so before its ACK.
			w, st := watchServedC1(t, c, fs, "n1")
			resp := findLog(sink, responseMsg)
			if resp == nil {
				t.Fatalf("no %q line", responseMsg)
			}
			want := map[string]string{"server": fs.Address(), "type": cdsURL, "version": "1", "nonce": "n1", "resources": "1"}
			if p.delta {
				// mustSendCluster sets no system_version_info on delta.
				want["version"] = ""
				want["removed"] = "0"
			}
			for k, v := range want {
				if resp.attrs[k] != v {
					t.Errorf("%q line %v: %s = %q, want %q", responseMsg, resp, k, resp.attrs[k], v)
				}
			}
			if _, ok := resp.attrs["removed"]; ok && !p.delta {
				t.Errorf("%q line %v: a SotW response has no removed count", responseMsg, resp)
			}
			if resp.level != slog.LevelDebug {
				t.Errorf("%q line at %v, want debug", responseMsg, resp.level)
			}

			// A stream that answered ends: no outage.
			st.Cut(grpcstatus.Error(codes.Unavailable, "connection reset"))
			st2 := nextStreamOf(t, fs)
			readReq(t, st2)
			// The next fails before answering: an outage. The transport
			// reports the failure to the client before it opens another
			// stream, so the outage is logged by then.
			st2.Cut(grpcstatus.Error(codes.Unavailable, "connection refused"))
			st3 := nextStreamOf(t, fs)
			readReq(t, st3)
			w.wantError(t, "ambient-error", client.ErrServerUnavailable, "C1")
			if findLog(sink, recoveryMsg) != nil {
				t.Fatalf("%q logged before the server answered", recoveryMsg)
			}
			clk.Advance(3 * time.Second)
			mustSendCluster(t, st3, "2", "n3", testutils.Cluster("C1", "eds-2"))
			// The recovery is logged while the response is applied, before
			// its ACK.
			wantACK(t, st3, "n3")

			var outage, recovery []int
			records := sink.all()
			for i, r := range records {
				switch r.msg {
				case outageMsg:
					outage = append(outage, i)
				case recoveryMsg:
					recovery = append(recovery, i)
					if r.level != slog.LevelWarn || r.attrs["server"] != fs.Address() || r.attrs["outage"] != "3s" {
						t.Errorf("%q line %v, want warning level with the server %s and the outage, 3s", recoveryMsg, r, fs.Address())
					}
				}
			}
			if len(outage) != 1 || len(recovery) != 1 || recovery[0] < outage[0] {
				t.Errorf("outage lines at %v, recovery lines at %v: want one of each, the recovery after the outage", outage, recovery)
			}
			if t.Failed() {
				for _, r := range records {
					t.Log(r)
				}
			}
		})
	}
}

// findLog returns the first record with message msg, or nil.
func findLog(sink *logSink, msg string) *logRecord {
	for _, r := range sink.all() {
		if r.msg == msg {
			return &r
		}
	}
	return nil
}
