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
		ts.pendingUnsub = emptied(ts.pendingUnsub)
		ts.subsChanged = false
		return nil, nil, r
	}
	req := &discoveryv3.DeltaDiscoveryRequest{
		Node:    node,
		TypeUrl: ts.typeURL,
	}
	// A plain key alone may concern a name that parameterised keys still
	// need (ts.params), so the wire form is worked out then too.
	params := len(ts.params) > 0 || hasParamKey(sub) || hasParamKey(unsub)
	if params {
		// Subscriptions with dynamic parameters: locators beside the
		// names (see locators.go).
		req.ResourceNamesSubscribe, req.ResourceNamesUnsubscribe, req.ResourceLocatorsSubscribe, req.ResourceLocatorsUnsubscribe = ts.deltaWireLocked(sub, unsub)
		if !first && !more && r == nil && len(req.ResourceNamesSubscribe)+len(req.ResourceNamesUnsubscribe)+
			len(req.ResourceLocatorsSubscribe)+len(req.ResourceLocatorsUnsubscribe) == 0 {
			// Only a plain name left that parameterised subscriptions
			// still need: the server is told nothing.
			ts.sentLocked()
			return nil, nil, nil
		}
	} else {
		req.ResourceNamesSubscribe, req.ResourceNamesUnsubscribe = sub, unsub
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
	// The names subscribed are sub itself (sorted keys of pendingSub)
	// unless sub adds "*" for the legacy wildcard: then it is one longer.
	// Sorting 100,000 names a second time cost 60 ms of a client's first
	// request at 100k clusters. Nothing writes to either slice.
	if len(sub) == len(ts.pendingSub) {
		names = sub
	} else {
		names = sortedKeys(ts.pendingSub)
	}
	if params {
		names = reportedKeys(names)
	}
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
// or through the wildcard. The map is keyed by name, so a name with
// subscriptions with dynamic parameters goes in only when every one of its
// subscriptions holds the same version (see locators.go): the versions that
// are held agreeing is not enough, since a subscription that holds nothing
// would be claimed too and a server that honours the claim would never send
// it.
func heldVersions(ts *typeState) map[string]string {
	if len(ts.initialVersions) == 0 {
		return nil
	}
	_, wildcard := ts.names[wildcardName]
	out := make(map[string]string, len(ts.initialVersions))
	var conflict map[string]bool
	for key, v := range ts.initialVersions {
		name, param := paramKey(key)
		if _, ok := ts.names[key]; !ok && (param || !wildcard) {
			// The wildcard wants plain resources, not variants.
			continue
		}
		if ts.params[name] == 0 {
			out[name] = v
			continue
		}
		if prev, ok := out[name]; (ok && prev != v) || conflict[name] {
			if conflict == nil {
				conflict = make(map[string]bool)
			}
			conflict[name] = true
			delete(out, name)
			continue
		}
		out[name] = v
	}
	if len(ts.params) == 0 {
		return nilIfEmpty(out)
	}
	// Every subscription of a name with parameterised ones must hold a
	// version: each of its parameterised keys, and its plain name when
	// wanted by name or through the wildcard.
	for key := range ts.names {
		name, param := paramKey(key)
		if !param || isImplicit(key) {
			continue
		}
		if _, held := ts.initialVersions[key]; !held {
			delete(out, name)
		}
	}
	for name := range ts.params {
		if _, plain := ts.names[name]; !plain && !wildcard {
			continue
		}
		if _, held := ts.initialVersions[name]; !held {
			delete(out, name)
		}
	}
	return nilIfEmpty(out)
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func hasParamKey(keys []string) bool {
	for _, k := range keys {
		if _, ok := paramKey(k); ok {
			return true
		}
	}
	return false
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
	// A ResourceName without constraints names the variant without
	// constraints, as a plain removed_resources name does.
	removed := m.GetRemovedResources()
	var variants []*discoveryv3.ResourceName
	if rn := m.GetRemovedResourceNames(); len(rn) > 0 {
		all := make([]string, 0, len(removed)+len(rn))
		all = append(all, removed...)
		for _, n := range rn {
			if n.GetDynamicParameterConstraints().GetType() != nil {
				variants = append(variants, n)
				continue
			}
			all = append(all, n.GetName())
		}
		removed = all
	}
	return &Response{
		TypeURL:         m.GetTypeUrl(),
		Version:         m.GetSystemVersionInfo(),
		Nonce:           m.GetNonce(),
		Delta:           true,
		DeltaResources:  m.GetResources(),
		Removed:         removed,
		RemovedVariants: variants,
		ResourceErrors:  m.GetResourceErrors(),
		ControlPlane:    m.GetControlPlane().GetIdentifier(),
	}, nil
}
