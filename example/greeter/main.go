// Command greeter shows a gRPC channel routed by xDS through goxds's
// resolver and balancer (package grpcxds). It is self-contained: it starts
// an in-process management server (go-control-plane's, from
// goxds/testutils), three greeter backends in two localities, and a
// client channel to "goxds:///greeter"; then it changes the configuration
// on the management server step by step and prints, after each step, how
// many RPCs each backend served:
//
//  1. the route splits traffic 80/20 between two clusters;
//  2. the route is changed to send everything to one cluster;
//  3. a locality of that cluster is drained over EDS, and the cluster
//     fails over to its priority 1 in the other locality;
//  4. the locality is healthy again, and traffic fails back.
//
// Run it with
//
//	go run ./example/greeter
//	go run ./example/greeter -delta -rpcs 5000   # over delta ADS, more RPCs per step
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

const nodeID = "greeter-demo"

// demoTimeout bounds the whole demo: it takes well under a second, but a
// broken one must not hang.
const demoTimeout = 30 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "greeter:", err)
		os.Exit(1)
	}
}

// run is the whole command but for signals and the exit status, so that
// tests can run it.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("greeter", flag.ContinueOnError)
	rpcs := fs.Int("rpcs", 1000, "RPCs counted per step")
	delta := fs.Bool("delta", false, "speak delta ADS to the management server instead of state of the world")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *rpcs < 1 || fs.NArg() > 0 {
		return fmt.Errorf("usage: greeter [-rpcs N] [-delta]")
	}
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()

	m := &mesh{}
	for _, b := range []struct{ name, locality string }{
		{"east-1", "us-east/zone-a"}, {"east-2", "us-east/zone-a"}, {"west-1", "us-west/zone-b"},
	} {
		be, err := startBackend(b.name, b.locality)
		if err != nil {
			return err
		}
		defer be.stop()
		m.backends = append(m.backends, be)
	}

	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		return err
	}
	defer ms.Stop()
	apiType := testutils.APITypeSotW
	if *delta {
		apiType = testutils.APITypeDelta
	}
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), APIType: apiType, NodeID: nodeID}))
	if err != nil {
		return err
	}
	// The channel's xDS client is closed with the channel, before the
	// management server stops (defers run last first).
	b, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: cfg, ClientOptions: client.Options{WatchExpiry: 2 * time.Second}})
	if err != nil {
		return err
	}
	defer b.Close()
	conn, err := grpcxds.NewClient("goxds:///"+listenerName, b,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()

	fmt.Fprintf(out, "management server on %s (%s); backends east-1, east-2 (us-east/zone-a), west-1 (us-west/zone-b); channel to goxds:///%s\n\n",
		ms.Address(), apiType, listenerName)
	update := func(ctx context.Context) error { return ms.Update(ctx, nodeID, m.resources()) }
	return play(ctx, m, update, conn, *rpcs, out)
}
