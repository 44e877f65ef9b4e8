package testutils

import (
	"sync"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
)

// ProcFlowLog is what a processor of ProcWindowed saw of the filter's
// flow control (gRFC A93) on the wire.
type ProcFlowLog struct {
	mu sync.Mutex
	// inits are the flow_control_init of the streams, one per stream.
	inits []*procv3.ProcessingRequest_FlowControlInit
	// toUpstream and toDownstream are the sums of the client_window_update
	// increments the filter sent.
	toUpstream, toDownstream int64
}

// Inits are the flow_control_init each stream's first message carried
// (nil for a stream whose first message had none).
func (l *ProcFlowLog) Inits() []*procv3.ProcessingRequest_FlowControlInit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*procv3.ProcessingRequest_FlowControlInit(nil), l.inits...)
}

// Returned are the sums of the window the filter returned, for the
// processor's client messages (sidestream to upstream on a client) and
// its server messages.
func (l *ProcFlowLog) Returned() (toUpstream, toDownstream int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.toUpstream, l.toDownstream
}

// ProcWindowed makes f (a ProcessEach answerer) a processor that does
// the ext_proc protocol's flow control, logging what it sees in log. On
// each stream's first message (the one with flow_control_init, which
// every other lacks) it cuts the filter's two windows to window bytes;
// each message body it gets it gives back at once, in the first answer
// to it (or an answer of its own when f gives none): so with a small
// window, the filter has one message at a time in flight in each
// direction. It sends no more than f does back, whatever window the
// filter gives it.
func ProcWindowed(window int64, log *ProcFlowLog, f func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error)) func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
	return func(req *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		var grant *procv3.ProcessingResponse_ServerWindowUpdate
		log.mu.Lock()
		if fi := req.GetFlowControlInit(); fi != nil {
			log.inits = append(log.inits, fi)
			grant = &procv3.ProcessingResponse_ServerWindowUpdate{
				WindowIncrementDownstreamToSidestream: window - fi.GetInitialWindowDownstreamToSidestream(),
				WindowIncrementUpstreamToSidestream:   window - fi.GetInitialWindowUpstreamToSidestream(),
			}
		}
		if u := req.GetClientWindowUpdate(); u != nil {
			log.toUpstream += u.GetWindowIncrementSidestreamToUpstream()
			log.toDownstream += u.GetWindowIncrementSidestreamToDownstream()
		}
		log.mu.Unlock()
		if req.GetRequest() == nil {
			return nil, nil // a window update alone: no event to answer
		}
		resps, err := f(req)
		if err != nil {
			return nil, err
		}
		if n := int64(len(req.GetRequestBody().GetBody())) + int64(len(req.GetResponseBody().GetBody())); n > 0 {
			if grant == nil {
				grant = &procv3.ProcessingResponse_ServerWindowUpdate{}
			}
			if req.GetRequestBody() != nil {
				grant.WindowIncrementDownstreamToSidestream += n
			} else {
				grant.WindowIncrementUpstreamToSidestream += n
			}
		}
		if grant == nil {
			return resps, nil
		}
		if len(resps) == 0 {
			return []*procv3.ProcessingResponse{{ServerWindowUpdate: grant}}, nil
		}
		first := proto.Clone(resps[0]).(*procv3.ProcessingResponse)
		first.ServerWindowUpdate = grant
		return append([]*procv3.ProcessingResponse{first}, resps[1:]...), nil
	}
}
