package httpxds_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// warnBurst is how many like warnings the Transport writes in a row
// (internal/warnlimit.Burst).
const warnBurst = 10

// msgRecorder keeps the records of one message.
type msgRecorder struct {
	msg     string
	mu      *sync.Mutex
	records *[]slog.Record
}

func (h msgRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h msgRecorder) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.mu.Lock()
		*h.records = append(*h.records, r)
		h.mu.Unlock()
	}
	return nil
}
func (h msgRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h msgRecorder) WithGroup(string) slog.Handler      { return h }

// Every endpoint of 30 clusters unhealthy at once (a zone down) used to
// write 30 warnings, one per cluster; 10,000 at 10,000 clusters. The
// Transport writes a burst of them (internal/warnlimit, as grpcxds's
// balancer does), the last saying that more are held back.
func TestClientUnusableClustersWarnInABurst(t *testing.T) {
	const n = 30
	const msg = "cluster has no usable endpoint; its RPCs fail"
	var (
		mu      sync.Mutex
		records []slog.Record
	)
	e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) {
		o.Logger = slog.New(msgRecorder{msg: msg, mu: &mu, records: &records})
	}})
	ok1, ok2 := newBackend(t, "ok1"), newBackend(t, "ok2")
	config := func(last string, downs int) testutils.Resources {
		var rs []*routev3.Route
		res := testutils.Resources{}
		for i := range downs {
			name := fmt.Sprintf("down%d", i)
			rs = append(rs, toCluster(prefix("/"+name+"/"), name, nil))
			res.Clusters = append(res.Clusters, testutils.Cluster(name, name))
			res.Endpoints = append(res.Endpoints, testutils.Endpoints(name, []testutils.EndpointSpec{
				{Host: "127.0.0.1", Port: 1, Health: corev3.HealthStatus_UNHEALTHY}}))
		}
		rs = append(rs, toCluster(prefix("/"), last, nil))
		c, eds := clusterOf(last, map[string]*backend{"ok1": ok1, "ok2": ok2}[last])
		res.Clusters = append(res.Clusters, c)
		res.Endpoints = append(res.Endpoints, eds)
		res.Listeners = world(routes("rc", rs...), nil).Listeners
		return res
	}
	e.update(config("ok1", n))
	e.want(e.get("/x"), 200, "ok1 GET")
	// The Transport hears of the configuration on the client's callback
	// goroutine, one update at a time, and writes an update's lines
	// before it returns: once the next update is taken, every line of
	// this one is written.
	e.update(config("ok2", 0))
	e.waitConfig(svcHost, "cluster ok2 is in, down0 gone", func(s *watchers.Snapshot) bool {
		return s.Clusters.Get("ok2") != nil && s.Clusters.Get("down0") == nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(records) != warnBurst {
		t.Fatalf("%d clusters unusable together wrote %d warnings, want a burst of %d", n, len(records), warnBurst)
	}
	var note bool
	records[len(records)-1].Attrs(func(a slog.Attr) bool {
		note = note || a.Key == "note"
		return true
	})
	if !note {
		t.Errorf("the last warning written does not say that more are held back")
	}
}
