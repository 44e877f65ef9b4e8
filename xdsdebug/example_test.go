package xdsdebug_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
	"github.com/goxds/xds/xdsdebug"
)

// Mount the page beside /debug/pprof and show the service's config tree
// on it, then read it as a tool would. An in-process management server
// stands in for a real one.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer ms.Stop()
	res := testutils.DefaultResources(testutils.ResourceParams{ListenerName: "payments", ClusterNames: []string{"payments-a", "payments-b"}})
	if err := ms.Update(ctx, "example-node", res); err != nil {
		log.Fatal(err)
	}
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: "example-node"}))
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	dbg := xdsdebug.New(c, xdsdebug.Options{})
	mux := http.NewServeMux() // the service's debug mux, with /debug/pprof
	mux.Handle("/debug/xds", dbg)

	// The service's own tree watcher, passed through the page.
	snapshots := make(chan *watchers.Snapshot, 1)
	tw, untrack := dbg.Track("payments", watchers.TreeWatcherFuncs{
		OnUpdate: func(s *watchers.Snapshot) { snapshots <- s },
	})
	defer untrack()
	stop := watchers.WatchConfigTree(c, "payments", watchers.TreeOptions{}, tw)
	defer stop()
	select {
	case <-snapshots:
	case <-ctx.Done():
		log.Fatal("no snapshot")
	}

	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/debug/xds?format=json")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Authorities []struct {
			Servers []struct{ State string }
		}
		Trees []struct {
			Name     string
			Clusters int
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		log.Fatal(err)
	}
	fmt.Println("server:", page.Authorities[0].Servers[0].State)
	fmt.Printf("tree %s: %d clusters\n", page.Trees[0].Name, page.Trees[0].Clusters)
	// Output:
	// server: connected
	// tree payments: 2 clusters
}
