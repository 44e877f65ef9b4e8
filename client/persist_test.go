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

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
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

// A record kept from an earlier run keeps its own time through the rewrites
// of its file (another resource of the type accepted meanwhile), served
// from disk or not, so that
// MaxAge still finds it stale in time: a file rewritten every day must not
// keep a month-old resource of a server that is down forever. A record
// older than MaxAge in a file that is not is ignored, with a warning.
func TestPersistKeptRecordKeepsItsTime(t *testing.T) {
	dir := t.TempDir()
	cfg := testBootstrap()
	server := cfg.Servers[0].ServerURI
	now := time.Now()
	aged := time.Unix(0, now.Add(-30*time.Minute).UnixNano()) // as decoded: no monotonic reading
	f := &lkgFile{node: cfg.Node.ID, servers: []string{server}, typeURL: resources.ListenerTypeURL, written: now,
		records: []lkgRecord{
			{name: "L1", version: "7", server: server, written: aged, value: lis("L1", "a").GetValue()},
			{name: "L2", version: "7", server: server, written: now.Add(-3 * time.Hour), value: lis("L2", "a").GetValue()},
		}}
	path := filepath.Join(dir, lkgFileName(f.typeURL))
	if err := os.WriteFile(path, encodeLKG(f), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	clk := testutils.NewFakeClock(now)
	h := newHarness(t, nil, Options{Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Persist: PersistOptions{Dir: dir, Wait: time.Second, MaxAge: time.Hour}})
	w := h.watchAll(wholeWorldType, "L1", "L3")
	clk.Advance(time.Second)
	w["L1"].wantUpdate(t, "L1", "a") // served from disk, and written back
	if err := h.respond(&transport.Response{TypeURL: resources.ListenerTypeURL, Version: "1", Nonce: "n", Resources: []*anypb.Any{lis("L3", "a")}}); err != nil {
		t.Fatal(err)
	}
	h.c.Close() // the last write
	if !strings.Contains(logs.String(), "ignoring stale resources in last-known-good file") {
		t.Errorf("no warning of L2, older than MaxAge:\n%s", logs.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeLKG(data)
	if err != nil {
		t.Fatal(err)
	}
	times := make(map[string]time.Time)
	for _, r := range got.records {
		times[r.name] = r.written
	}
	if len(times) != 2 || !times["L1"].Equal(aged) || !times["L3"].After(now) {
		t.Errorf("rewritten file holds %v; want L1 at its own time %v and L3 newer than %v, and not L2", times, aged, now)
	}
}
