package lbpolicy

import (
	"testing"

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
						b.Fatal(err)
					}
					if res.Counted {
						res.Endpoint.CallFinished()
					}
				}
			})
		})
	}
}
