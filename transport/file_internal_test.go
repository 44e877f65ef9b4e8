package transport

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

// recordingHandler records the responses and unservable reports of a
// transport driven on the test's goroutine, applying each response at
// once, each as a description: "good <version>" or "errors <names>".
type recordingHandler struct{ told []string }

func (h *recordingHandler) OnResponse(r *Response, done func()) error {
	h.told = append(h.told, "good "+r.Version)
	done()
	return nil
}
func (h *recordingHandler) OnUnservable(_ string, names []string, _ error) {
	h.told = append(h.told, "errors "+strings.Join(names, ","))
}
func (h *recordingHandler) OnSubscriptionsSent(string, []string)      {}
func (h *recordingHandler) OnStreamError(*StreamError)                {}
func (h *recordingHandler) ResourceVersions(string) map[string]string { return nil }

// take returns the descriptions recorded since the last call.
func (h *recordingHandler) take() []string {
	out := h.told
	h.told = nil
	return out
}

// A name may be subscribed after run took the names wanted and before it
// reads a change of the file: the read reports a bad file to it, and run
// then finds it added. It must not be told of the file again (its watchers
// would hear the error twice). A name unsubscribed and subscribed again is
// told anew. The transport's loop is driven step by step on this goroutine,
// in the order that run's select may pick.
func TestFileBadFileToldOncePerSubscription(t *testing.T) {
	const ldsURL = "type.googleapis.com/envoy.config.listener.v3.Listener"
	dir := t.TempDir()
	server := bootstrap.ServerConfig{
		ServerURI:     dir,
		APIType:       bootstrap.APITypeFilesystem,
		ResourceFiles: map[string]string{ldsURL: "lds.yaml"},
	}
	if err := (&bootstrap.Config{Servers: []bootstrap.ServerConfig{server}}).Validate(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lds.yaml")
	h := &recordingHandler{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &fileTransport{
		server:  server,
		handler: h,
		logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		quiet:   time.Hour,
		ctx:     ctx,
		cancel:  cancel,
		wake:    make(chan struct{}, 1),
		subs:    make(map[string]*fileSub),
	}
	states := make(map[string]*fileState)
	step := func(want ...string) {
		t.Helper()
		if got := h.take(); !slices.Equal(got, want) {
			t.Fatalf("responses %q, want %q", got, want)
		}
	}

	good := testutils.SotWResponse(ldsURL, "1", "", testutils.MarshalAny(testutils.Listener("L1", "R1")))
	if err := testutils.WriteResponseFile(path, good); err != nil {
		t.Fatal(err)
	}
	tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	tr.serveWanted(nil, states, tr.wanted())
	step("good 1")

	// L2 is subscribed, then the file is replaced by a bad one, and run
	// hears of the file before it looks at the names wanted.
	tr.UpdateSubscriptions(ldsURL, []string{"L2"}, nil)
	if err := testutils.WriteFileAtomically(path, []byte("version_info: [unclosed\n")); err != nil {
		t.Fatal(err)
	}
	tr.onEvent(fileEvent{name: path, op: opReplaced}, states, tr.namesOf)
	step("errors L1,L2")
	tr.serveWanted(nil, states, tr.wanted())
	step("good 1") // L2 gets the last valid content; the error it has

	// L2 again, after its unsubscription: another watch, told anew.
	tr.UpdateSubscriptions(ldsURL, nil, []string{"L2"})
	tr.UpdateSubscriptions(ldsURL, []string{"L2"}, nil)
	tr.serveWanted(nil, states, tr.wanted())
	step("good 1", "errors L2")

	// The same, the unsubscription seen by run first.
	tr.UpdateSubscriptions(ldsURL, nil, []string{"L2"})
	tr.serveWanted(nil, states, tr.wanted())
	tr.UpdateSubscriptions(ldsURL, []string{"L2"}, nil)
	tr.serveWanted(nil, states, tr.wanted())
	step("good 1", "errors L2")
}
