package transport

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// sotwProtocol speaks the state-of-the-world variant: every request names
// every resource wanted, with the last accepted version and latest nonce.
type sotwProtocol struct {
	open func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error)
}

func (p sotwProtocol) isDelta() bool { return false }

func (p sotwProtocol) openStream(ctx context.Context) (wireStream, error) {
	s, err := p.open(ctx)
	if err != nil {
		return nil, err
	}
	return sotwStream{s}, nil
}

// requestLocked builds the next request for ts, or returns nil when there is
// nothing to say. names is non-nil when the request changed subscriptions:
// every name wanted, "*" included however the wildcard is spelt on the wire
// (see wildcard.go).
func (p sotwProtocol) requestLocked(ts *typeState, node *corev3.Node, now time.Time) (msg proto.Message, names []string, r *reply) {
	return p.request(ts, node, now, true)
}

// request is requestLocked. With replyApart, an ACK owed while the
// subscriptions changed goes out first on its own, naming what the last
// request on the stream did; the change follows in the next request. The
// ACK must describe the client as it was when the response arrived: a
// removal sent just before may have crossed the response and been ignored
// for its stale nonce, and were the change to go out in the ACK, a name
// removed then wanted again would look unchanged to the server, which
// believes the client holds it from the response and would not send it
// again though the client has dropped it. Told the names of the response's
// time first, the server sees the removal, then the addition. A NACK still
// carries the change: alone, the change would read as an ACK of what the
// NACK rejects (see takeReplyLocked), and the NACK's older version makes
// the server send every name anyway.
func (p sotwProtocol) request(ts *typeState, node *corev3.Node, now time.Time, replyApart bool) (msg proto.Message, names []string, r *reply) {
	if ts.judging {
		// Sent now, it would carry a nonce the server has replaced (see
		// typeState.judging); recvLoop signals once the verdict is recorded.
		return nil, nil, nil
	}
	r = ts.takeReplyLocked(now, ts.subsChanged)
	if !ts.subsChanged && r == nil {
		return nil, nil, nil
	}
	if replyApart && r != nil && r.err == nil && ts.subsChanged && ts.sentOnStream {
		req := &discoveryv3.DiscoveryRequest{
			Node:             node,
			TypeUrl:          ts.typeURL,
			VersionInfo:      ts.version,
			ResourceNames:    ts.lastWire,
			ResourceLocators: ts.lastLocators,
			ResponseNonce:    ts.nonce,
		}
		return req, nil, r // subsChanged stays set: the change is next
	}
	wire, send, more := ts.sotwNamesLocked()
	if !send {
		// Nothing was ever asked for on this stream; an empty list now would
		// read as the legacy wildcard. Any owed reply cannot be sent either.
		ts.subsChanged = false
		return nil, nil, r
	}
	var locs []*discoveryv3.ResourceLocator
	if len(ts.params) > 0 && len(wire) > 0 {
		// Subscriptions with dynamic parameters: locators beside the
		// names (see locators.go).
		wire, locs = ts.sotwWireLocked(wire)
	}
	ts.lastWire, ts.lastLocators = wire, locs
	req := &discoveryv3.DiscoveryRequest{
		Node:             node,
		TypeUrl:          ts.typeURL,
		VersionInfo:      ts.version,
		ResourceNames:    wire,
		ResourceLocators: locs,
		ResponseNonce:    ts.nonce,
	}
	if r != nil && r.err != nil {
		req.ErrorDetail = errorDetail(r.err)
	}
	if more {
		// The first of the two requests that drop a legacy wildcard: it
		// changes nothing the client wants, and the change stays pending.
		ts.halfSentLocked()
		return req, nil, r
	}
	if ts.subsChanged {
		names = ts.sortedNamesLocked()
		if len(ts.params) > 0 {
			names = reportedKeys(names)
		}
		if names == nil {
			names = []string{}
		}
	}
	if len(wire) > 0 {
		ts.namedOnStream = true
	}
	ts.sentLocked()
	return req, names, r
}

// recordReplyLocked stores the verdict on resp: the nonce becomes the latest
// and, on ACK, the version the accepted one. They are updated only now, after
// the response was applied, so that no request looks like an ACK of a
// response not yet judged; no request of the type went out meanwhile either
// (typeState.judging), which would have carried a nonce the server may
// ignore.
func (p sotwProtocol) recordReplyLocked(ts *typeState, resp *Response, err error) {
	ts.judging = false
	ts.nonce = resp.Nonce
	if err == nil {
		ts.version = resp.Version
	}
}

type sotwStream struct {
	s grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
}

func (s sotwStream) send(m proto.Message) error {
	return s.s.Send(m.(*discoveryv3.DiscoveryRequest))
}

// requiresNonce: a gRPC stream pairs each response with its reply by nonce.
func (sotwStream) requiresNonce() {}

func (s sotwStream) recv() (*Response, error) {
	m, err := s.s.Recv()
	if err != nil {
		return nil, err
	}
	return &Response{
		TypeURL:        m.GetTypeUrl(),
		Version:        m.GetVersionInfo(),
		Nonce:          m.GetNonce(),
		Resources:      m.GetResources(),
		ResourceErrors: m.GetResourceErrors(),
		ControlPlane:   m.GetControlPlane().GetIdentifier(),
	}, nil
}

// MaxErrorDetailBytes bounds the message of a NACK's error_detail, as
// Envoy's 4 KiB does: a server's receive limit must not be the client's
// problem. A longer verdict from [Handler.OnResponse] is cut.
const MaxErrorDetailBytes = 4096

// errorDetail is the error_detail of a NACK with verdict err: at most
// MaxErrorDetailBytes, cut at a rune boundary, and valid UTF-8, which a
// proto string must be (the verdict may quote what the server sent).
func errorDetail(err error) *statuspb.Status {
	msg := strings.ToValidUTF8(err.Error(), "\uFFFD")
	if len(msg) > MaxErrorDetailBytes {
		n := MaxErrorDetailBytes
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
		msg = msg[:n]
	}
	return &statuspb.Status{Code: int32(codes.InvalidArgument), Message: msg}
}
