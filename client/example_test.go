package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Watch two clusters, one the management server has and one it does not.
// An in-process management server stands in for a real one here; with a
// real one, the bootstrap would come from bootstrap.FromEnv.
func ExampleNew() {
	ctx, cancelCtx := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelCtx()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer ms.Stop()
	res := testutils.DefaultResources(testutils.ResourceParams{ClusterNames: []string{"payments"}})
	if err := ms.Update(ctx, "example-node", res); err != nil {
		log.Fatal(err)
	}

	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: ms.Address(),
		NodeID:    "example-node",
	}))
	if err != nil {
		log.Fatal(err)
	}
	// WatchExpiry is how long a resource may take to arrive before it is
	// taken not to exist: 15 s by default, as the xDS spec recommends.
	c, err := client.New(cfg, client.Options{WatchExpiry: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Callbacks run one at a time on the client's goroutine; they hand
	// what they learn over without blocking.
	events := make(chan string, 4)
	watch := func(name string) (cancel func()) {
		return client.WatchCluster(c, name, client.WatcherFuncs[*resources.Cluster]{
			OnUpdate: func(cl *resources.Cluster) {
				events <- fmt.Sprintf("%s: %v cluster, endpoints from EDS %q", cl.Name, cl.Kind, cl.EDSServiceName())
			},
			OnResourceError: func(err error) {
				events <- fmt.Sprintf("%s: does not exist: %v", name, errors.Is(err, client.ErrResourceNotFound))
			},
			OnAmbientError: func(err error) { log.Printf("management server trouble, data kept: %v", err) },
		})
	}
	next := func() string {
		select {
		case e := <-events:
			return e
		case <-ctx.Done():
			log.Fatal("no news from the client")
			return ""
		}
	}
	defer watch("payments")()
	fmt.Println(next())
	defer watch("no-such-cluster")()
	fmt.Println(next())
	// Output:
	// payments: EDS cluster, endpoints from EDS "payments"
	// no-such-cluster: does not exist: true
}
