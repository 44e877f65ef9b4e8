package watchers_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// Follow a listener to its endpoints. An in-process management server
// stands in for a real one here; with a real one, the bootstrap would come
// from bootstrap.FromEnv.
func ExampleWatchConfigTree() {
	ctx, cancelCtx := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelCtx()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer ms.Stop()
	err = ms.Update(ctx, "example-node", testutils.DefaultResources(testutils.ResourceParams{
		ListenerName: "greeter",
		ClusterNames: []string{"greeter-v1", "greeter-v2"},
		Ports:        []uint32{50051, 50052},
	}))
	if err != nil {
		log.Fatal(err)
	}

	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: ms.Address(),
		NodeID:    "example-node",
	}))
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	updates := make(chan *watchers.Snapshot, 1)
	cancel := watchers.WatchConfigTree(c, "greeter", watchers.TreeOptions{}, watchers.TreeWatcherFuncs{
		OnUpdate: func(s *watchers.Snapshot) {
			// Callbacks run on the client's goroutine: hand the snapshot
			// over without blocking, the newest one winning.
			select {
			case <-updates:
			default:
			}
			updates <- s
		},
		OnResourceError: func(err error) { log.Printf("no usable config: %v", err) },
	})
	defer cancel()

	select {
	case s := <-updates:
		fmt.Printf("listener %s, route config %s\n", s.Listener.Name, s.RouteConfig.Name)
		for _, name := range s.Clusters.Names() {
			cc := s.Clusters.Get(name)
			if cc.Err != nil {
				fmt.Printf("  %s: %v\n", name, cc.Err)
				continue
			}
			for _, loc := range cc.Endpoints.Localities {
				for _, ep := range loc.Endpoints {
					fmt.Printf("  %s: %s\n", name, ep.Addresses[0])
				}
			}
		}
	case <-ctx.Done():
		log.Fatal("no snapshot")
	}
	// Output:
	// listener greeter, route config greeter-route
	//   greeter-v1: 127.0.0.1:50051
	//   greeter-v1: 127.0.0.1:50052
	//   greeter-v2: 127.0.0.1:50051
	//   greeter-v2: 127.0.0.1:50052
}
