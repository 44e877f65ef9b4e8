package transport

import (
	"context"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// deltaProtocol speaks the incremental variant: requests carry only
// subscription changes, and ACKs only the nonce of the response.
type deltaProtocol struct {
	open func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], error)
}

func (p deltaProtocol) isDelta() bool { return true }

func (p deltaProtocol) openStream(ctx context.Context) (wireStream, error) {
	s, err := p.open(ctx)
	if err != nil {
		return nil, err
	}
	return deltaStream{s}, nil
}

// requestLocked builds the next delta request for ts. names is what the
// request newly subscribes, "*" included however the wildcard is spelt on
// the wire (see wildcard.go).
func (p deltaProtocol) requestLocked(ts *typeState, node *corev3.Node, now time.Time) (msg proto.Message, names []string, r *reply) {
	r = ts.takeReplyLocked(now, len(ts.pendingSub)+len(ts.pendingUnsub) > 0)
	first := !ts.sentOnStream
	if len(ts.pendingSub) == 0 && len(ts.pendingUnsub) == 0 && r == nil {
		ts.subsChanged = false
		return nil, nil, nil
	}
	sub, unsub, send, more := ts.deltaChangesLocked()
	if !send {
		clear(ts.pendingUnsub)
		ts.subsChanged = false
		return nil, nil, r
	}
	req := &discoveryv3.DeltaDiscoveryRequest{
		Node:                     node,
		TypeUrl:                  ts.typeURL,
		ResourceNamesSubscribe:   sub,
		ResourceNamesUnsubscribe: unsub,
	}
	if first {
		req.InitialResourceVersions = heldVersions(ts)
		ts.initialVersions = nil
	}
	if r != nil {
		req.ResponseNonce = r.nonce
		if r.err != nil {
			req.ErrorDetail = errorDetail(r.err)
		}
	}
	names = sortedKeys(ts.pendingSub)
	if len(sub) > 0 {
		ts.namedOnStream = true
	}
	if more {
		// The first of the two requests that drop a legacy wildcard: what
		// it subscribes is sent, the removal of "*" stays pending.
		ts.halfSentLocked()
		return req, names, r
	}
	ts.sentLocked()
	return req, names, r
}

// heldVersions are the initial_resource_versions of the first request on a
// stream: the resources the client holds that it still wants, whether by name
// or through the wildcard.
func heldVersions(ts *typeState) map[string]string {
	if len(ts.initialVersions) == 0 {
		return nil
	}
	_, wildcard := ts.names["*"]
	out := make(map[string]string, len(ts.initialVersions))
	for name, v := range ts.initialVersions {
		if _, ok := ts.names[name]; ok || wildcard {
			out[name] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (p deltaProtocol) recordReplyLocked(ts *typeState, resp *Response, err error) {}

type deltaStream struct {
	s grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
}

func (s deltaStream) send(m proto.Message) error {
	return s.s.Send(m.(*discoveryv3.DeltaDiscoveryRequest))
}

// requiresNonce: a gRPC stream pairs each response with its reply by nonce.
func (deltaStream) requiresNonce() {}

func (s deltaStream) recv() (*Response, error) {
	m, err := s.s.Recv()
	if err != nil {
		return nil, err
	}
	removed := m.GetRemovedResources()
	if rn := m.GetRemovedResourceNames(); len(rn) > 0 {
		all := make([]string, 0, len(removed)+len(rn))
		all = append(all, removed...)
		for _, n := range rn {
			all = append(all, n.GetName())
		}
		removed = all
	}
	return &Response{
		TypeURL:        m.GetTypeUrl(),
		Version:        m.GetSystemVersionInfo(),
		Nonce:          m.GetNonce(),
		Delta:          true,
		DeltaResources: m.GetResources(),
		Removed:        removed,
		ResourceErrors: m.GetResourceErrors(),
		ControlPlane:   m.GetControlPlane().GetIdentifier(),
	}, nil
}
