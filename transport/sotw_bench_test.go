package transport

import (
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
)

// BenchmarkSotWACK10kNames: the ACK of a SotW response for a type with
// 10,000 subscribed names. SotW repeats every name in every request, so each
// response of the type costs the client this much to answer, whatever
// changed.
func BenchmarkSotWACK10kNames(b *testing.B) {
	ts := newTypeState("type.googleapis.com/envoy.config.cluster.v3.Cluster")
	names := make([]string, 10_000)
	for i := range names {
		names[i] = fmt.Sprintf("cluster-%05d", i)
	}
	ts.updateLocked(names, nil)
	var p sotwProtocol
	if msg, _, _ := p.requestLocked(ts, nil, time.Time{}); msg == nil {
		b.Fatal("no subscription request")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		ts.reply = &reply{nonce: fmt.Sprint(i), sent: make(chan struct{})}
		msg, _, _ := p.requestLocked(ts, nil, time.Time{})
		if _, err := proto.Marshal(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubscribe10kNames: 10,000 names subscribed at once on a new
// type, as a config tree learns its clusters from one route configuration,
// and the SotW request that carries them built and marshalled.
func BenchmarkSubscribe10kNames(b *testing.B) {
	benchmarkSubscribe(b, sotwProtocol{})
}

// BenchmarkDeltaSubscribe10kNames is BenchmarkSubscribe10kNames on delta:
// the names go in resource_names_subscribe.
func BenchmarkDeltaSubscribe10kNames(b *testing.B) {
	benchmarkSubscribe(b, deltaProtocol{})
}

func benchmarkSubscribe(b *testing.B, p interface {
	requestLocked(*typeState, *corev3.Node, time.Time) (proto.Message, []string, *reply)
}) {
	names := make([]string, 10_000)
	for i := range names {
		names[i] = fmt.Sprintf("cluster-%05d", i)
	}
	b.ReportAllocs()
	for range b.N {
		ts := newTypeState("type.googleapis.com/envoy.config.cluster.v3.Cluster")
		ts.updateLocked(names, nil)
		msg, _, _ := p.requestLocked(ts, nil, time.Time{})
		if _, err := proto.Marshal(msg); err != nil {
			b.Fatal(err)
		}
	}
}
