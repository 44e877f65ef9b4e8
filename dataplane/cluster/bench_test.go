package cluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
)

// BenchmarkPick measures one pick of each policy over three localities of
// ten ready endpoints, from parallel goroutines.
func BenchmarkPick(b *testing.B) {
	ten := []uint32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	for _, pol := range []resources.LBPolicy{
		{Kind: resources.LBRoundRobin},
		{Kind: resources.LBRoundRobin, WRRLocality: true},
		{Kind: resources.LBLeastRequest, ChoiceCount: 2, WRRLocality: true},
		{Kind: resources.LBPickFirst, WRRLocality: true},
		{Kind: resources.LBRingHash},
		// Without reports (a round robin), but with the per-request
		// report hook of its Done.
		{Kind: resources.LBWeightedRoundRobin, WRR: resources.WRRConfig{WeightExpirationPeriod: time.Hour, WeightUpdatePeriod: time.Hour}},
	} {
		name := pol.Kind.String()
		if pol.WRRLocality {
			name = "wrr_locality_" + name
		}
		b.Run(name, func(b *testing.B) {
			benchPick(b, prio(endpoint.Ready, ten, ten, ten).with(pol))
		})
	}
	// Outlier detection counts each request's outcome, in its Done.
	b.Run("round_robin_outlier_detection", func(b *testing.B) {
		p := prio(endpoint.Ready, ten, ten, ten).with(resources.LBPolicy{Kind: resources.LBRoundRobin})
		withOutlierDetection(p)
		benchPick(b, p)
	})
}

// benchPick makes picks of p's picker from parallel goroutines, ending
// each request at once.
func benchPick(b *testing.B, p *priority) {
	pp := p.picker(endpoint.Ready, testHeaderHash)
	b.RunParallel(func(pb *testing.PB) {
		var h uint64
		for pb.Next() {
			h += 0x9e3779b97f4a7c15
			res, err := pp.Pick(nil, h)
			if err != nil {
				b.Error(err) // not Fatal: this is one of RunParallel's goroutines
				return
			}
			res.Done.Finish(nil, nil)
		}
	})
}

// What noting a cluster's use costs a pick (ClusterIdleTimeout): a round
// robin pick over 30 endpoints, bare and through usedPicker, RPCs from
// every core at once.
func BenchmarkPickUsed(b *testing.B) {
	ten := []uint32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	p := prio(endpoint.Ready, ten, ten, ten).with(resources.LBPolicy{Kind: resources.LBRoundRobin})
	var used atomic.Bool
	for _, tc := range []struct {
		name string
		cp   Picker
	}{
		{"round_robin", p.picker(endpoint.Ready, testHeaderHash)},
		{"round_robin_used", usedPicker{Picker: p.picker(endpoint.Ready, testHeaderHash), used: &used}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := tc.cp.Pick(nil, 0)
					if err != nil {
						b.Error(err) // not Fatal: this is one of RunParallel's goroutines
						return
					}
					res.Done.Finish(nil, nil) // the circuit breaker's count
				}
			})
		})
	}
}
