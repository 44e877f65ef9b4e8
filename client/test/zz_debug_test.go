package test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

func TestZZDebugHB(t *testing.T) {
	var mu sync.Mutex
	var log []string
	start := time.Now()
	add := func(s string) {
		mu.Lock()
		log = append(log, fmt.Sprintf("%6dms %s", time.Since(start).Milliseconds(), s))
		mu.Unlock()
	}
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{
		HeartbeatInterval: hbTTL / 10,
		OnStreamRequest: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
			add(fmt.Sprintf("req %s v=%s n=%s names=%v err=%v", req.TypeUrl[len(req.TypeUrl)-8:], req.VersionInfo, req.ResponseNonce, req.ResourceNames, req.ErrorDetail))
			return nil
		},
		OnStreamResponse: func(_ int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
			var names []string
			for _, a := range resp.GetResources() {
				env, _ := resources.Unwrap(a)
				names = append(names, fmt.Sprintf("%s/hb=%v", env.Name, env.IsHeartbeat()))
			}
			add(fmt.Sprintf("resp v=%s n=%s %v", resp.VersionInfo, resp.Nonce, names))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	rs := testutils.Resources{Clusters: []*clusterv3.Cluster{testutils.Cluster("A", ""), testutils.Cluster("B", "")}}
	rs.TTLs = map[testutils.ResourceKey]time.Duration{{TypeURL: cdsURL, Name: "A"}: hbTTL}
	ms.Update(testContext(t), nodeID, rs)
	c := newClient(t, ms.Address(), sotw, config{})
	wa, wb := newRecorder[*resources.Cluster](), newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "A", wa)
	client.WatchCluster(c, "B", wb)
	wa.wantUpdate(t, "A")
	add("A delivered")
	wb.wantUpdate(t, "B")
	select {
	case ev := <-wa.events:
		add("A event " + ev.String())
	case <-time.After(1500 * time.Millisecond):
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range log {
		if len(log) < 200 {
			t.Log(l)
		}
	}
	for _, l := range log {
		if len(l) > 0 && contains([]string{l}, "x") {
		}
	}
	for _, l := range log {
		_ = l
	}
	failed := false
	for _, l := range log {
		if len(l) > 8 && l[8:15] == "A event" {
			failed = true
		}
	}
	if failed {
		t.Fatal("expired")
	}
}
