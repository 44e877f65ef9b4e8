package test

import (
	"log/slog"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// istiodIdentifier is a control_plane identifier as istiod writes it: a
// JSON object naming the component, the pod and its build.
func istiodIdentifier(pod string) string {
	return `{"Component":"istiod","ID":"` + pod + `","Info":{"version":"1.27.0","revision":"abc","golang_version":"go1.24.6","status":"Clean","tag":"1.27.0"}}`
}

// istiodWarning is the client's warning about istiod's delta server.
const istiodWarning = "istiod's delta xDS server is known to stop updating resources still watched after another is unsubscribed; use state of the world (api_type AGGREGATED_GRPC) with istiod"

// istiodWarnings returns the istiod warnings logged.
func istiodWarnings(sink *logSink) []logRecord {
	var got []logRecord
	for _, r := range sink.all() {
		if r.msg == istiodWarning {
			got = append(got, r)
		}
	}
	return got
}

// A delta stream whose server says it is istiod gets one warning, however
// many responses it sends and whichever istiod pod answers; over SotW,
// where istiod keeps every subscription, there is none.
func TestIstiodDeltaWarnedOnce(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		logger, sink := newCaptureLogger()
		e, w := listenerEnv(t, p, config{logger: logger})
		// The client logs before it answers: once the reply is read, a
		// line about the response is there.
		e.respondFrom(p, istiodIdentifier("istiod-7c9d-a"), "1", []string{"L1"})
		w.wantUpdate(t, "L1")
		e.respondFrom(p, istiodIdentifier("istiod-7c9d-a"), "2", []string{"L1"})
		e.respondFrom(p, istiodIdentifier("istiod-7c9d-b"), "3", []string{"L1"})
		got := istiodWarnings(sink)
		want := 0
		if p.delta {
			want = 1
		}
		if len(got) != want {
			t.Fatalf("%d istiod warnings %v, want %d", len(got), got, want)
		}
		if want == 1 && (got[0].level != slog.LevelWarn || got[0].attrs["server"] != e.fs.Address() || got[0].attrs["sign"] != "control_plane") {
			t.Fatalf("warning %v, want level WARN naming the server %s and the sign control_plane", got[0], e.fs.Address())
		}
	})
}

// Another control plane's identifier, even one that mentions istiod in
// passing, is no reason to warn.
func TestNoIstiodWarningForOthers(t *testing.T) {
	t.Parallel()
	logger, sink := newCaptureLogger()
	e, w := listenerEnv(t, delta, config{logger: logger})
	e.respondFrom(delta, "go-control-plane (istiod migration)", "1", []string{"L1"})
	w.wantUpdate(t, "L1")
	e.respondFrom(delta, `{"Component":"sdp","ID":"istiod"}`, "2", []string{"L1"})
	if got := istiodWarnings(sink); len(got) != 0 {
		t.Fatalf("istiod warning for another control plane: %v", got)
	}
}

// Recent istiod releases name themselves in control_plane only on their
// debug types; a bootstrap written by istio-agent (its node metadata has
// ISTIO_VERSION) says where the client is all the same: one warning at the
// first delta response, none over SotW.
func TestIstiodDeltaWarnedByBootstrap(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fs.Stop)
		b, err := bootstrapFor(fs.Address(), p, config{})
		if err != nil {
			t.Fatal(err)
		}
		b.Node.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"ISTIO_VERSION": structpb.NewStringValue("1.27.0")}}
		logger, sink := newCaptureLogger()
		c, err := client.New(b, client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		e := &fakeEnv{t: t, fs: fs, c: c}
		w := newRecorder[*resources.Listener]()
		client.WatchListener(c, "L1", w)
		e.reply(p)
		e.respondFrom(p, "", "1", []string{"L1"})
		w.wantUpdate(t, "L1")
		e.respondFrom(p, "", "2", []string{"L1"})
		got := istiodWarnings(sink)
		want := 0
		if p.delta {
			want = 1
		}
		if len(got) != want {
			t.Fatalf("%d istiod warnings %v, want %d", len(got), got, want)
		}
		if want == 1 && got[0].attrs["sign"] != "node metadata ISTIO_VERSION" {
			t.Fatalf("warning %v, want the sign node metadata ISTIO_VERSION", got[0])
		}
	})
}
