package serverlds

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// TestModeString: the names grpc-go gives its serving modes.
func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{Starting: "starting", Serving: "serving", NotServing: "not-serving", 7: "ServingMode(7)"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}

// lines is a slog.Handler that keeps each record's level and message.
type lines struct{ out *[]string }

func (l lines) Enabled(context.Context, slog.Level) bool { return true }
func (l lines) Handle(_ context.Context, r slog.Record) error {
	*l.out = append(*l.out, r.Level.String()+" "+r.Message)
	return nil
}
func (l lines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l lines) WithGroup(string) slog.Handler      { return l }

// TestLog: an address served, then not served for one reason twice, then
// for another, then served again: each reason is logged once, as a
// warning, and serving again is a warning too. A Report that no Listener
// made is logged in full.
func TestLog(t *testing.T) {
	var out []string
	logger := slog.New(lines{&out})
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	st := new(said)
	gone, other := errors.New("gone"), errors.New("for another address")
	for _, r := range []Report{
		{Mode: Serving}, {Mode: NotServing, Err: gone}, {Mode: NotServing, Err: gone},
		{Mode: NotServing, Err: other}, {Mode: Serving},
	} {
		r.Addr, r.Name, r.said = addr, "lds", st
		r.Log(logger, "test: ")
	}
	Report{Addr: addr, Name: "lds", Mode: NotServing, Err: gone}.Log(logger, "test: ")
	want := []string{"INFO test: serving", "WARN test: not serving: connections are closed at accept",
		"WARN test: not serving: connections are closed at accept", "WARN test: serving again",
		"WARN test: not serving: connections are closed at accept"}
	if !slices.Equal(out, want) {
		t.Errorf("logged\n%q\nwant\n%q", out, want)
	}
}

// TestReporterOrder: reports queued and flushed by many goroutines at once
// are told one at a time, each goroutine's in the order it queued them.
func TestReporterOrder(t *testing.T) {
	const goroutines, each = 8, 50
	var telling atomic.Int32
	last := make(map[string]int) // by name: the last Err told, as a number
	var overlaps atomic.Int32
	r := NewReporter(func(m Report) {
		if telling.Add(1) != 1 {
			overlaps.Add(1)
		}
		runtime.Gosched() // room for another goroutine to tell meanwhile
		n := int(m.Mode)
		if n != last[m.Name]+1 {
			t.Errorf("%s: told %d after %d", m.Name, n, last[m.Name])
		}
		last[m.Name] = n
		telling.Add(-1)
	})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := string(rune('a' + g))
			for i := 1; i <= each; i++ {
				// Mode as a sequence number: the test's, not a mode.
				r.add(Report{Name: name, Mode: Mode(i)})
				r.flush()
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d reports told while another was", n)
	}
	for g := range goroutines {
		if name := string(rune('a' + g)); last[name] != each {
			t.Errorf("%s: %d reports told, want %d", name, last[name], each)
		}
	}
}
