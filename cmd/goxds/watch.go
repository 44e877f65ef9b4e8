package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/internal/treeevents"
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
	q := treeevents.NewQueue()
	cancel := watchers.WatchConfigTree(c, *listener, watchers.TreeOptions{Authority: *authority}, q)
	defer cancel()

	var print func(treeevents.Event)
	if *asJSON {
		print = func(ev treeevents.Event) { printEventJSON(out, ev) }
	} else {
		fmt.Fprintf(out, "following listener %q (Ctrl-C to stop)\n", *listener)
		p := &treeevents.Printer{W: out}
		print = func(ev treeevents.Event) { p.Print(ev, "change at "+ev.At.Format(time.TimeOnly)) }
	}
	for {
		ev, err := q.Next(ctx)
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
