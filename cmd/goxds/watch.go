package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/watchers"
)

const watchSynopsis = "-listener name [-bootstrap file] [-authority a] [-param key=value]... [-json] [-v]"

func runWatch(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	bootstrapPath := fs.String("bootstrap", "", "bootstrap `file` (default: what $GRPC_XDS_BOOTSTRAP or $GRPC_XDS_BOOTSTRAP_CONFIG names)")
	listener := fs.String("listener", "", "`name` of the listener to follow (required)")
	authority := fs.String("authority", "", "`authority` that picks the virtual host (default: the listener name, as a gRPC channel to xds:///name does)")
	asJSON := fs.Bool("json", false, "print each event as one JSON object per line")
	verbose := fs.Bool("v", false, "log the client's debug output to stderr (default: warnings only)")
	params := paramsFlag(fs)
	if err := parseFlags(fs, args, watchSynopsis, out); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return badInputf("unexpected arguments %q", fs.Args())
	}
	if *listener == "" {
		return badInputf("-listener is required")
	}
	cfg, _, err := loadBootstrap(*bootstrapPath)
	if err != nil {
		return badInput(err)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	c, err := client.New(cfg, client.Options{Logger: logger, DynamicParameters: *params, Registry: grpcRegistry()})
	if err != nil {
		return badInput(err)
	}
	defer c.Close()
	q := newEventQueue()
	cancel := watchers.WatchConfigTree(c, *listener, watchers.TreeOptions{Authority: *authority}, q)
	defer cancel()

	var print func(event)
	if *asJSON {
		print = func(ev event) { printEventJSON(out, ev) }
	} else {
		fmt.Fprintf(out, "following listener %q (Ctrl-C to stop)\n", *listener)
		p := &printer{w: out}
		print = func(ev event) { p.print(ev, "change at "+ev.at.Format(time.TimeOnly)) }
	}
	for {
		ev, err := q.next(ctx)
		if err != nil {
			return nil // interrupted: the normal end
		}
		print(ev)
	}
}

// paramsFlag defines -param, repeatable, into a map.
func paramsFlag(fs *flag.FlagSet) *map[string]string {
	m := new(map[string]string)
	fs.Func("param", "dynamic parameter `key=value` sent with every subscription, to select variants of resources (repeatable)", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q: want key=value", kv)
		}
		if *m == nil {
			*m = make(map[string]string)
		}
		(*m)[k] = v
		return nil
	})
	return m
}

// event is one call of the tree to its watcher.
type event struct {
	at      time.Time
	snap    *watchers.Snapshot
	err     error // with ambient, or alone for a ResourceError
	ambient bool
}

// eventQueue is a TreeWatcher that queues what it is told for the main
// goroutine. It never blocks: the callbacks run on the client's goroutine,
// which must not wait for the printing (a slow terminal would hold the
// client's stream).
type eventQueue struct {
	mu     sync.Mutex
	q      []event
	notify chan struct{} // capacity 1: something was queued
}

func newEventQueue() *eventQueue { return &eventQueue{notify: make(chan struct{}, 1)} }

func (q *eventQueue) push(ev event) {
	ev.at = time.Now()
	q.mu.Lock()
	q.q = append(q.q, ev)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *eventQueue) Update(s *watchers.Snapshot) { q.push(event{snap: s}) }
func (q *eventQueue) ResourceError(err error)     { q.push(event{err: err}) }
func (q *eventQueue) AmbientError(err error)      { q.push(event{err: err, ambient: true}) }

// next returns the oldest event, waiting for one until ctx is done.
func (q *eventQueue) next(ctx context.Context) (event, error) {
	for {
		q.mu.Lock()
		if len(q.q) > 0 {
			ev := q.q[0]
			q.q = q.q[1:]
			q.mu.Unlock()
			return ev, nil
		}
		q.mu.Unlock()
		select {
		case <-q.notify:
		case <-ctx.Done():
			return event{}, ctx.Err()
		}
	}
}
