package testutils

import (
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// SotWResponse builds a DiscoveryResponse for a FakeServer to send: type
// typeURL, the given version and nonce, and msgs each wrapped by MarshalAny
// (a *discoveryv3.Resource from WrapResource thus arrives as a wrapped
// resource). Tests after malformed responses change the result by hand.
func SotWResponse(typeURL, version, nonce string, msgs ...proto.Message) *discoveryv3.DiscoveryResponse {
	resp := &discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: version, Nonce: nonce}
	for _, m := range msgs {
		resp.Resources = append(resp.Resources, MarshalAny(m))
	}
	return resp
}

// DeltaResponse builds a DeltaDiscoveryResponse for a FakeServer to send:
// type typeURL, the given nonce, resources (see WrapResource) and the names
// of removed resources.
func DeltaResponse(typeURL, nonce string, removed []string, resources ...*discoveryv3.Resource) *discoveryv3.DeltaDiscoveryResponse {
	return &discoveryv3.DeltaDiscoveryResponse{
		TypeUrl:          typeURL,
		Nonce:            nonce,
		Resources:        resources,
		RemovedResources: removed,
	}
}

// WrapResource wraps msg in a discovery.v3.Resource, the form resources take
// in delta responses and, for TTLs, in SotW ones. ttl > 0 sets its ttl. A nil
// msg leaves the body out, which with a ttl makes a heartbeat.
func WrapResource(name, version string, ttl time.Duration, msg proto.Message) *discoveryv3.Resource {
	r := &discoveryv3.Resource{Name: name, Version: version}
	if ttl > 0 {
		r.Ttl = durationpb.New(ttl)
	}
	if msg != nil {
		r.Resource = MarshalAny(msg)
	}
	return r
}

// CorruptAny returns an Any of type typeURL whose bytes do not decode as any
// message (a truncated varint), for tests of a client's handling of garbage.
func CorruptAny(typeURL string) *anypb.Any {
	return &anypb.Any{TypeUrl: typeURL, Value: []byte{0xff, 0xff, 0xff}}
}
