package grpcxds

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/balancer"

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// BenchmarkRoutePick measures the channel picker's pick of an RPC started
// by the interceptors, on a cluster of 30 ready SubConns taken in turn (the cluster layer's own pick is dataplane/cluster's BenchmarkPick):
// on a route that keeps the authority (what gRFC A81 must not slow down)
// and on one that rewrites it (a lookup of the SubConn's authority and a
// metadata map per pick).
func BenchmarkRoutePick(b *testing.B) {
	for _, rewrite := range []bool{false, true} {
		name := "plain"
		if rewrite {
			name = "auto_host_rewrite"
		}
		b.Run(name, func(b *testing.B) {
			rt := &resources.Route{Prefix: "/", Action: resources.RouteActionRoute, Cluster: "A", RuntimeFraction: -1, AutoHostRewrite: rewrite}
			cfg := &channelConfig{gen: 1, snap: &watchers.Snapshot{VirtualHost: &resources.VirtualHost{Routes: []*resources.Route{rt}}}}
			rc, err := cfg.selectRPC("/svc/M", nil, 7)
			if err != nil {
				b.Fatal(err)
			}
			p := newBenchPicker(30)
			rp := &routePicker{routes: cfg.snap.VirtualHost.Routes, clusters: cluster.PickerMapOf(map[string]cluster.Picker{"A": p}),
				gen: 1, warned: new(atomic.Bool), authorities: p.hostnames()}
			info := balancer.PickInfo{FullMethodName: "/svc/M", Ctx: context.WithValue(context.Background(), selectionKey{}, rc.sel)}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					// b.Error and return, not b.Fatal: this is one of
					// RunParallel's goroutines.
					res, err := rp.Pick(info)
					if err != nil {
						b.Error(err)
						return
					}
					if rewrite && res.Metadata == nil {
						b.Error("no authority")
						return
					}
					res.Done(balancer.DoneInfo{})
				}
			})
		})
	}
}

// benchPicker is a cluster's picker reduced to a round robin over ready
// SubConns: the benchmark measures the route picker's part of a pick.
type benchPicker struct {
	conns []endpoint.Conn
	next  atomic.Uint64
}

func newBenchPicker(n int) *benchPicker {
	p := &benchPicker{}
	for i := range n {
		p.conns = append(p.conns, &subConn{SubConn: &benchSubConn{id: i}})
	}
	return p
}

func (p *benchPicker) Pick(any, uint64) (cluster.Result, error) {
	return cluster.Result{Conn: p.conns[p.next.Add(1)%uint64(len(p.conns))]}, nil
}

// hostnames gives every SubConn of p an authority, as the balancer's
// authorities would hold them.
func (p *benchPicker) hostnames() *sync.Map {
	m := new(sync.Map)
	for _, c := range p.conns {
		s := sc(c).(*benchSubConn)
		m.Store(s, fmt.Sprintf("e%d.example", s.id))
	}
	return m
}

// benchSubConn is a SubConn the benchmark never connects.
type benchSubConn struct {
	balancer.SubConn
	id int
}
