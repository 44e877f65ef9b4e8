package client

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// lockedBuffer is a log sink safe for the client's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A persisted resource that no longer decodes or validates is ignored with
// a warning naming it and why; the others of its file are served.
func TestPersistInvalidRecordIgnored(t *testing.T) {
	dir := t.TempDir()
	cfg := testBootstrap()
	server := cfg.Servers[0].ServerURI
	f := &lkgFile{node: cfg.Node.ID, servers: []string{server}, typeURL: resources.ListenerTypeURL, written: time.Now(),
		records: []lkgRecord{
			{name: "L1", version: "7", server: server, value: lis("L1", "a").GetValue()},
			{name: "L2", version: "7", server: server, value: lis("L2", "invalid").GetValue()},
			{name: "L3", version: "7", server: server, value: []byte("\xff\xff not a listener")},
			{name: "L4", version: "7", server: server, value: lis("other", "a").GetValue()},
		}}
	if err := os.WriteFile(filepath.Join(dir, lkgFileName(f.typeURL)), encodeLKG(f), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := newHarness(t, nil, Options{Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Persist: PersistOptions{Dir: dir, Wait: time.Second}})
	w := h.watchAll(wholeWorldType, "L1", "L2", "L3", "L4")
	clk.Advance(time.Second)
	w["L1"].wantUpdate(t, "L1", "a")
	h.sync()
	for _, name := range []string{"L2", "L3", "L4"} {
		w[name].none(t)
	}
	if st, _ := h.status(resources.ListenerTypeURL, "L1"); !st.FromDisk || st.Version != "7" {
		t.Errorf("L1: %+v, want version 7 from disk", st)
	}
	for _, want := range []string{"name=L2 reason=", "stat_prefix: invalid", "name=L3 reason=", `name=L4 reason="the value is named \"other\""`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs do not hold %q:\n%s", want, logs.String())
		}
	}
}
