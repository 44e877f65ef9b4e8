// Command tree watches the config tree of one listener and logs each
// snapshot: the README's first example, kept here so that it compiles.
package main

import (
	"context"
	"errors"
	"log"
	"os"
	"os/signal"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/watchers"
)

func main() {
	// GRPC_XDS_BOOTSTRAP (a file) or GRPC_XDS_BOOTSTRAP_CONFIG (the JSON), as gRPC reads them.
	cfg, err := bootstrap.FromEnv()
	if errors.Is(err, bootstrap.ErrNoBootstrap) {
		log.Fatal("set GRPC_XDS_BOOTSTRAP to the path of an xDS bootstrap file")
	} else if err != nil {
		log.Fatal(err) // names the file and the field that is wrong
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	cancel := watchers.WatchConfigTree(c, "my-service", watchers.TreeOptions{}, watchers.TreeWatcherFuncs{
		OnUpdate:        func(s *watchers.Snapshot) { log.Printf("%d clusters", s.Clusters.Len()) },
		OnResourceError: func(err error) { log.Printf("no usable config: %v", err) },
		OnAmbientError:  func(err error) { log.Printf("keeping the last config: %v", err) },
	})
	defer cancel()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	<-ctx.Done()
}
