package grpcxds

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// BenchmarkRoutePick measures the channel picker's pick of an RPC started
// by the interceptors, on a round robin cluster of 30 ready endpoints:
// on a route that keeps the authority (what gRFC A81 must not slow down)
// and on one that rewrites it (a lookup of the SubConn's authority and a
// metadata map per pick).
func BenchmarkRoutePick(b *testing.B) {
	ten := []uint32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
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
			p := prio(connectivity.Ready, ten, ten, ten).with(resources.LBPolicy{Kind: resources.LBRoundRobin})
			rp := &routePicker{routes: cfg.snap.VirtualHost.Routes, clusters: pickerMap{}.with(map[string]clusterPicker{"A": p.picker(connectivity.Ready)}),
				gen: 1, warned: new(atomic.Bool), authorities: hostnamesFor(p)}
			info := balancer.PickInfo{FullMethodName: "/svc/M", Ctx: context.WithValue(context.Background(), selectionKey{}, rc.sel)}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := rp.Pick(info)
					if err != nil {
						b.Fatal(err)
					}
					if rewrite && res.Metadata == nil {
						b.Fatal("no authority")
					}
					res.Done(balancer.DoneInfo{})
				}
			})
		})
	}
}

// hostnamesFor gives every SubConn of p an authority, as the balancer's
// authorities would hold them.
func hostnamesFor(p *priority) *sync.Map {
	m := new(sync.Map)
	for _, l := range p.lb.Localities {
		for _, e := range l.Endpoints {
			m.Store(sc(e.Endpoint.Conn()), e.Endpoint.Key()+".example")
		}
	}
	return m
}
