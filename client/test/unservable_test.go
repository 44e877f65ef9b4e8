package test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/client/csds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Names a transport cannot serve: a resource file missing or rejected, a
// type the server's API has no service for. Their watchers are told why,
// and the server's health is left as it was.

// A resource_files server with the listeners' file and without the
// clusters': the cluster's watcher is told at once that its file cannot be
// read, naming it; once the file appears without the cluster, the
// does-not-exist timer runs and fires; once it has it, it is delivered.
func TestFileMissingTypeFileTellsItsWatchers(t *testing.T) {
	t.Parallel()
	const expiry = 300 * time.Millisecond
	dir := t.TempDir()
	lisPath := filepath.Join(dir, fileNames[ldsURL])
	if err := testutils.WriteResponseFile(lisPath, testutils.SotWResponse(ldsURL, "1", "", testutils.Listener("L1", "R1"))); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, dir, files, config{expiry: expiry})
	wl := newRecorder[*resources.Listener]()
	client.WatchListener(c, "L1", wl)
	wl.wantUpdate(t, "L1")

	wc := newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "C1", wc)
	ev := wc.wantError(t, "resource-error", client.ErrServerUnavailable, "C1")
	t.Logf("the watcher was told: %v", ev.err)
	if !strings.Contains(ev.err.Error(), fileNames[cdsURL]) {
		t.Fatalf("error %q does not name the missing file %s", ev.err, fileNames[cdsURL])
	}
	if st, _ := status(c, cdsURL, "C1"); st.Status != client.StatusRequested || st.Err == nil || !strings.Contains(st.Err.Error(), fileNames[cdsURL]) {
		t.Errorf("Dump shows C1 %v with error %v, want REQUESTED with the missing file named", st.Status, st.Err)
	}
	// A watcher that comes later is told the same.
	late := newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "C1", late)
	late.wantError(t, "resource-error", client.ErrServerUnavailable, "C1")

	cdsPath := filepath.Join(dir, fileNames[cdsURL])
	if err := testutils.WriteResponseFile(cdsPath, testutils.SotWResponse(cdsURL, "1", "", testutils.Cluster("C2", ""))); err != nil {
		t.Fatal(err)
	}
	wc.wantNotFound(t, "C1")
	if err := testutils.WriteResponseFile(cdsPath, testutils.SotWResponse(cdsURL, "2", "", testutils.Cluster("C1", ""))); err != nil {
		t.Fatal(err)
	}
	wc.wantUpdate(t, "C1")
}

// customURL is a type no per-type xDS service serves.
const customURL = "type.googleapis.com/google.protobuf.StringValue"

// customType decodes StringValues, named by their value.
var customType = resources.NewType(resources.TypeOptions[*customValue]{
	TypeURL: customURL,
	Decode: func(_ *resources.DecodeContext, a *anypb.Any) (string, *customValue, error) {
		var v wrapperspb.StringValue
		if err := a.UnmarshalTo(&v); err != nil {
			return "", nil, err
		}
		return v.GetValue(), &customValue{&v}, nil
	},
})

type customValue struct{ v *wrapperspb.StringValue }

func (c *customValue) ResourceName() string { return c.v.GetValue() }
func (c *customValue) Proto() proto.Message { return c.v }

// While a per-type server is down, a name of a type it has no service for
// is reported unservable to its watcher, and that is no answer of the
// server: Metrics.Connected never says connected, no "reachable again" is
// logged, a new watcher is still told at once that the server is
// unavailable, and the failed streams that follow are the same outage:
// the watchers were told once, and stay so.
func TestUnservableNameIsNoAnswer(t *testing.T) {
	t.Parallel()
	fs := startFake(t, "")
	addr := fs.Address()
	fs.Stop() // nothing answers there
	m := &metrics{}
	logger, sink := newCaptureLogger()
	c := newFaultClient(t, addr, sotwPerType, func(o *client.Options) {
		o.Metrics = m
		o.Logger = logger
		o.ResourceTypes = append(resources.Registered(), customType)
	})
	wc := newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "C1", wc)
	wc.wantError(t, "resource-error", client.ErrServerUnavailable, "C1")
	waitFor(t, "the outage to be logged", func() bool { return findLog(sink, outageMsg) != nil })

	wx := newRecorder[resources.Resource]()
	c.WatchResource(customURL, "X", wx)
	for {
		ev := wx.next(t)
		if strings.Contains(ev.err.Error(), "no service") {
			t.Logf("the watcher of the unservable name was told: %v", ev.err)
			if !errors.Is(ev.err, client.ErrServerUnavailable) {
				t.Errorf("error %v is no ErrServerUnavailable", ev.err)
			}
			break
		}
		if !errors.Is(ev.err, client.ErrServerUnavailable) {
			t.Fatalf("got %v, want the server unavailable, or the type unservable", ev)
		}
	}
	ended := countLogs(sink, "xDS stream ended")

	// Still the same outage: a new watcher is told at once.
	wc2 := newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "C2", wc2)
	wc2.wantError(t, "resource-error", client.ErrServerUnavailable, "C2")
	// Two more failed streams: the client has judged the first by the time
	// the second is logged (one goroutine reports both, in turn).
	waitFor(t, "two more failed streams", func() bool { return countLogs(sink, "xDS stream ended") >= ended+2 })
	barrier(t, c)
	wc.none(t)
	_, _, _, failures, connected := m.counts()
	for _, up := range connected {
		if up {
			t.Errorf("Metrics.Connected said connected (%v) with the server down", connected)
			break
		}
	}
	if failures != 1 || countLogs(sink, outageMsg) != 1 {
		t.Errorf("%d server failures and %d outage lines, want one outage", failures, countLogs(sink, outageMsg))
	}
	if r := findLog(sink, recoveryMsg); r != nil {
		t.Errorf("%v logged with the server down", r)
	}
}

// A bad resource file, and a missing one, are no answer either: the
// server is never reported connected, nor reachable again.
func TestBadFileIsNoAnswer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeBadListenersFile(t, dir)
	m := &metrics{}
	logger, sink := newCaptureLogger()
	c := newFaultClient(t, dir, files, func(o *client.Options) {
		o.Metrics = m
		o.Logger = logger
	})
	wc := newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "C1", wc)
	wc.wantError(t, "resource-error", client.ErrServerUnavailable, "C1")
	wl := newRecorder[*resources.Listener]()
	client.WatchListener(c, "L1", wl)
	wl.wantError(t, "resource-error", client.ErrResourceInvalid, "L1")
	barrier(t, c)
	if _, _, _, _, connected := m.counts(); len(connected) != 0 {
		t.Errorf("Metrics.Connected said %v with no file read", connected)
	}
	if r := findLog(sink, recoveryMsg); r != nil {
		t.Errorf("%v logged with no file read", r)
	}
	if r := findLog(sink, "resource files reachable again"); r != nil {
		t.Errorf("%v logged with no file read", r)
	}
}

// countLogs counts the records with message msg.
func countLogs(sink *logSink, msg string) int {
	n := 0
	for _, r := range sink.all() {
		if r.msg == msg {
			n++
		}
	}
	return n
}

// While the server is unreachable, Dump and CSDS show the resources that
// wait on it with the server's error, not as REQUESTED and nothing wrong;
// once it answers, the error is gone.
func TestDumpShowsTheServerDown(t *testing.T) {
	t.Parallel()
	fs := startFake(t, "")
	c := newFaultClient(t, fs.Address(), sotw, nil)
	w, st := watchServedC1(t, c, fs, "n1")
	wl := newRecorder[*resources.Listener]()
	client.WatchListener(c, "L1", wl)
	readReq(t, st)
	st.Cut(grpcstatus.Error(codes.Unavailable, "connection reset")) // answered: routine
	st2 := nextStreamOf(t, fs)
	readReq(t, st2)
	st2.Cut(grpcstatus.Error(codes.Unavailable, "connection refused")) // an outage
	w.wantError(t, "ambient-error", client.ErrServerUnavailable, "C1")
	wl.wantError(t, "resource-error", client.ErrServerUnavailable, "L1")

	if got, _ := status(c, ldsURL, "L1"); got.Status != client.StatusRequested || !errors.Is(got.Err, client.ErrServerUnavailable) {
		t.Errorf("Dump shows L1 %v with error %v, want REQUESTED with the server unavailable", got.Status, got.Err)
	} else {
		t.Logf("Dump: L1 %v: %v", got.Status, got.Err)
	}
	if got, _ := status(c, cdsURL, "C1"); got.Status != client.StatusACKed || got.Err != nil {
		t.Errorf("Dump shows C1 %v with error %v, want ACKED, and no error: it waits for nothing", got.Status, got.Err)
	}
	g := csdsConfig(c, ldsURL, "L1")
	if g.GetClientStatus() != adminv3.ClientResourceStatus_REQUESTED || !strings.Contains(g.GetErrorState().GetDetails(), "management server unavailable") {
		t.Errorf("CSDS shows L1 %v with error_state %v, want REQUESTED with the server unavailable", g.GetClientStatus(), g.GetErrorState())
	}

	st3 := nextStreamOf(t, fs)
	readReq(t, st3)
	if err := st3.Send(sotwResp(ldsURL, "1", testutils.Listener("L1", "R1"))); err != nil {
		t.Fatal(err)
	}
	wl.wantUpdate(t, "L1")
	if got, _ := status(c, ldsURL, "L1"); got.Err != nil {
		t.Errorf("Dump shows L1 %v with error %v once the server answered", got.Status, got.Err)
	}
	if g := csdsConfig(c, ldsURL, "L1"); g.GetErrorState() != nil {
		t.Errorf("CSDS shows L1 with error_state %v once the server answered", g.GetErrorState())
	}
}

// csdsConfig returns the CSDS config of one resource of c.
func csdsConfig(c *client.Client, typeURL, name string) *statusv3.ClientConfig_GenericXdsConfig {
	for _, g := range csds.ClientConfig(c, csds.Options{}).GetGenericXdsConfigs() {
		if g.GetTypeUrl() == typeURL && g.GetName() == name {
			return g
		}
	}
	return nil
}

// A name whose file is rejected from the start is told so, as is a watcher
// that comes later; once the file is fixed without it, its does-not-exist
// timer runs and fires: the error of a file long fixed does not stay.
func TestBadFileThenFixedWithoutTheName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeBadListenersFile(t, dir)
	c := newClient(t, dir, files, config{expiry: 300 * time.Millisecond})
	w := newRecorder[*resources.Listener]()
	client.WatchListener(c, "L1", w)
	w.wantError(t, "resource-error", client.ErrResourceInvalid, "L1")
	late := newRecorder[*resources.Listener]()
	client.WatchListener(c, "L1", late)
	late.wantError(t, "resource-error", client.ErrResourceInvalid, "L1")

	if err := testutils.WriteResponseFile(path, testutils.SotWResponse(ldsURL, "1", "", testutils.Listener("L2", "R2"))); err != nil {
		t.Fatal(err)
	}
	w.wantNotFound(t, "L1")
	late.wantNotFound(t, "L1")
	if st, _ := status(c, ldsURL, "L1"); st.Status != client.StatusDoesNotExist || st.Err != nil {
		t.Errorf("Dump shows L1 %v with error %v, want DOES_NOT_EXIST and no error", st.Status, st.Err)
	}
}
