package lbpolicy

import (
	"testing"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
)

// BenchmarkLeafPick measures one pick of each policy over three
// localities of ten ready endpoints, from parallel goroutines, without a
// transport's adapter (grpcxds's BenchmarkPick has it).
func BenchmarkLeafPick(b *testing.B) {
	ten := []uint32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	for _, pol := range []resources.LBPolicy{
		{Kind: resources.LBRoundRobin},
		{Kind: resources.LBRoundRobin, WRRLocality: true},
		{Kind: resources.LBLeastRequest, ChoiceCount: 2, WRRLocality: true},
		{Kind: resources.LBPickFirst, WRRLocality: true},
		{Kind: resources.LBRingHash},
	} {
		name := pol.Kind.String()
		if pol.WRRLocality {
			name = "wrr_locality_" + name
		}
		b.Run(name, func(b *testing.B) {
			p := leaf(endpoint.Ready, ten, ten, ten).with(pol).Picker()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var h uint64
				for pb.Next() {
					h += 0x9e3779b97f4a7c15
					res, err := p.Pick(h)
					if err != nil {
						b.Error(err) // not Fatal: this is one of RunParallel's goroutines
						return
					}
					if res.Counted {
						res.Endpoint.CallFinished()
					}
				}
			})
		})
	}
}

// BenchmarkLeafPickWRR measures one weighted_round_robin pick over thirty
// ready endpoints whose load reports give them thirty different weights
// (the stride schedule; BenchmarkLeafPick's has no reports: a round
// robin), and with the per-request report the transport hands back.
func BenchmarkLeafPickWRR(b *testing.B) {
	eps := make([]uint32, 30)
	for i := range eps {
		eps[i] = 1
	}
	l := leaf(endpoint.Ready, eps).with(resources.LBPolicy{Kind: resources.LBWeightedRoundRobin, WRR: resources.WRRConfig{
		WeightExpirationPeriod: time.Hour, WeightUpdatePeriod: time.Hour, ErrorUtilizationPenalty: 1}})
	p := l.Picker()
	for i := range eps {
		res, _ := p.Pick(0)
		res.Load.Report(LoadReport{QPS: float64(10 * (i + 1)), CPUUtilization: 0.5})
	}
	p = l.Picker()
	if p.(*wrrPicker).sched.Load().weights == nil {
		b.Fatal("the schedule is a round robin")
	}
	for _, report := range []bool{false, true} {
		b.Run(map[bool]string{false: "pick", true: "pick+report"}[report], func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := p.Pick(0)
					if err != nil {
						b.Error(err) // not Fatal: this is one of RunParallel's goroutines
						return
					}
					if report {
						res.Load.Report(LoadReport{QPS: 100, CPUUtilization: 0.5})
					}
				}
			})
		})
	}
}
