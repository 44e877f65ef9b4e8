package main

import (
	"runtime"
	"slices"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// floors are the least work any client must do with the responses of a
// world: unmarshal them, with every resource's Any unpacked into its typed
// message. Nothing is validated, nothing is kept.
type floors struct {
	full time.Duration // the LDS, RDS, CDS and EDS responses of the whole tree
	eds  time.Duration // the SotW EDS response: what one endpoint change costs in SotW
	cds  time.Duration // the SotW CDS response: what a full-state resend costs
	one  time.Duration // a delta response with one ClusterLoadAssignment
}

func measureFloors(w *world) floors {
	resp := func(typeURL string) []byte {
		items := w.snap.sets[typeURL].items
		names := make([]string, 0, len(items))
		for name := range items {
			names = append(names, name)
		}
		slices.Sort(names)
		dr := &discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: "1", Nonce: "1"}
		for _, name := range names {
			b, err := cache.MarshalResource(items[name].Resource)
			if err != nil {
				panic(err)
			}
			dr.Resources = append(dr.Resources, &anypb.Any{TypeUrl: typeURL, Value: b})
		}
		b, err := proto.Marshal(dr)
		if err != nil {
			panic(err)
		}
		return b
	}
	lds, rds, cds, eds := resp(ldsURL), resp(rdsURL), resp(cdsURL), resp(edsURL)
	one, err := proto.Marshal(&discoveryv3.DeltaDiscoveryResponse{
		TypeUrl: edsURL, Nonce: "1",
		Resources: []*discoveryv3.Resource{{Name: clusterName(0), Version: "v", Resource: mustAny(w.endpointsAt(0, 1))}},
	})
	if err != nil {
		panic(err)
	}
	return floors{
		full: fastest(func() { unmarshalSotW(lds, rds, cds, eds) }),
		eds:  fastest(func() { unmarshalSotW(eds) }),
		cds:  fastest(func() { unmarshalSotW(cds) }),
		one:  fastest(func() { unmarshalDelta(one) }),
	}
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

// fastest runs f a few times, each after a GC, and returns its fastest run.
func fastest(f func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	var total time.Duration
	for i := 0; i < 50 && (i < 3 || total < 300*time.Millisecond); i++ {
		runtime.GC()
		start := time.Now()
		f()
		d := time.Since(start)
		best, total = min(best, d), total+d
		if total > 2*time.Second && i >= 1 {
			break
		}
	}
	return best
}

func newTyped(typeURL string) proto.Message {
	switch typeURL {
	case ldsURL:
		return &listenerv3.Listener{}
	case rdsURL:
		return &routev3.RouteConfiguration{}
	case cdsURL:
		return &clusterv3.Cluster{}
	case edsURL:
		return &endpointv3.ClusterLoadAssignment{}
	}
	panic("unknown type " + typeURL)
}

var sink []proto.Message

func unmarshalSotW(msgs ...[]byte) {
	for _, b := range msgs {
		var dr discoveryv3.DiscoveryResponse
		if err := proto.Unmarshal(b, &dr); err != nil {
			panic(err)
		}
		out := make([]proto.Message, 0, len(dr.Resources))
		for _, a := range dr.Resources {
			m := newTyped(a.GetTypeUrl())
			if err := proto.Unmarshal(a.GetValue(), m); err != nil {
				panic(err)
			}
			out = append(out, m)
		}
		sink = out
	}
}

func unmarshalDelta(b []byte) {
	var dr discoveryv3.DeltaDiscoveryResponse
	if err := proto.Unmarshal(b, &dr); err != nil {
		panic(err)
	}
	out := make([]proto.Message, 0, len(dr.Resources))
	for _, r := range dr.Resources {
		m := newTyped(r.GetResource().GetTypeUrl())
		if err := proto.Unmarshal(r.GetResource().GetValue(), m); err != nil {
			panic(err)
		}
		out = append(out, m)
	}
	sink = out
}
