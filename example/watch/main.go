// Command watch follows an xDS config tree (listener → routes → clusters →
// endpoints) with goxds's watchers.WatchConfigTree and prints it, then
// every change to it.
//
// With no flags it is a self-contained demo: it starts an in-process
// management server (go-control-plane's, from goxds/testutils) with a small
// service mesh, prints the resolved tree, applies a few changes on the
// server (an endpoint drained, traffic shifted, a cluster deleted), prints
// what each changed, says the demo is over, and exits:
//
//	go run ./example/watch
//	go run ./example/watch -delta   # the same over delta ADS
//
// Given a bootstrap (-bootstrap, or GRPC_XDS_BOOTSTRAP /
// GRPC_XDS_BOOTSTRAP_CONFIG as gRPC reads them) it talks to that server
// instead and runs until interrupted:
//
//	go run ./example/watch -bootstrap bootstrap.json -listener my-service
//
// -param key=value (repeatable) sends dynamic parameters with every
// subscription, for servers that keep variants of resources.
//
// Logs go to stderr, warnings only unless -v.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/internal/treeevents"
	"github.com/goxds/xds/watchers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "watch:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	bootstrap string
	listener  string
	authority string
	delta     bool
	verbose   bool
	// params are the dynamic parameters of every watch (-param).
	params map[string]string
}

// run is the whole command, apart from signals and the exit status, so
// that tests can run it: it parses args, prints to stdout, and returns
// when the demo is over or ctx is done.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	fs.StringVar(&o.bootstrap, "bootstrap", "", "bootstrap `file` of a real management server (default: $"+bootstrap.EnvFile+" or $"+bootstrap.EnvConfig+"; neither: the built-in demo)")
	fs.StringVar(&o.listener, "listener", "", "`name` of the listener to follow (required with a bootstrap; default in the demo: "+demoListener+")")
	fs.StringVar(&o.authority, "authority", "", "`authority` that picks the virtual host (default: the listener name)")
	fs.BoolVar(&o.delta, "delta", false, "demo: speak delta ADS to the built-in server instead of state of the world")
	fs.BoolVar(&o.verbose, "v", false, "log debug output to stderr")
	fs.Func("param", "dynamic parameter `key=value` sent with every subscription, to select variants of resources (repeatable)", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q: want key=value", kv)
		}
		if o.params == nil {
			o.params = make(map[string]string)
		}
		o.params[k] = v
		return nil
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cfg, err := loadBootstrap(o.bootstrap)
	switch {
	case errors.Is(err, bootstrap.ErrNoBootstrap):
		return runDemo(ctx, o, stdout, logger)
	case err != nil:
		return err
	}
	if o.listener == "" {
		return errors.New("-listener is required with a bootstrap")
	}
	if o.delta {
		logger.Warn("-delta applies to the demo only; the bootstrap's api_type decides")
	}
	return follow(ctx, cfg, o, stdout, logger)
}

// loadBootstrap reads the file given, else what the environment names; it
// returns bootstrap.ErrNoBootstrap if there is neither.
func loadBootstrap(path string) (*bootstrap.Config, error) {
	if path != "" {
		return bootstrap.Load(path)
	}
	return bootstrap.FromEnv()
}

// follow prints the tree from a real server and every change, until ctx
// is done.
func follow(ctx context.Context, cfg *bootstrap.Config, o options, stdout io.Writer, logger *slog.Logger) error {
	c, err := client.New(cfg, client.Options{Logger: logger, DynamicParameters: o.params})
	if err != nil {
		return err
	}
	defer c.Close()
	q := treeevents.NewQueue()
	cancel := watchers.WatchConfigTree(c, o.listener, watchers.TreeOptions{Authority: o.authority}, q)
	defer cancel()
	fmt.Fprintf(stdout, "following listener %q (Ctrl-C to stop)\n", o.listener)

	p := &treeevents.Printer{W: stdout, Render: render}
	for {
		ev, err := q.Next(ctx)
		if err != nil {
			return nil // interrupted: a normal end
		}
		p.Print(ev, "change at "+ev.At.Format(time.TimeOnly))
	}
}
