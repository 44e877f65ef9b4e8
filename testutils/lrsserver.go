package testutils

import (
	"context"
	"errors"
	"fmt"

	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	"google.golang.org/grpc"
)

// LRSServer is a scriptable load reporting service
// (envoy.service.load_stats.v3.LoadReportingService) for tests:
// go-control-plane ships none. Serve it beside a ManagementServer
// (ManagementServerOptions.LoadReporting), so that clusters whose
// lrs_server is self report to it. Each stream a client opens is handed to
// the test (NextStream), which reads the client's LoadStatsRequests and
// sends the LoadStatsResponses it wants. Its methods are safe for
// concurrent use.
type LRSServer struct {
	lrsv3.UnimplementedLoadReportingServiceServer
	streams chan *LRSStream
}

// NewLRSServer returns an LRSServer with no stream yet.
func NewLRSServer() *LRSServer {
	return &LRSServer{streams: make(chan *LRSStream, 64)}
}

// NextStream returns the next stream a client opened, waiting for it until
// ctx is done.
func (s *LRSServer) NextStream(ctx context.Context) (*LRSStream, error) {
	select {
	case st := <-s.streams:
		return st, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("testutils: no LRS stream: %w", ctx.Err())
	}
}

// LRSStream is one LoadStatsRequest stream, as the server sees it.
type LRSStream struct {
	reqs  chan *lrsv3.LoadStatsRequest
	sends chan sendReq
	cut   chan error
	done  chan struct{} // closed when the handler returned
}

type sendReq struct {
	resp *lrsv3.LoadStatsResponse
	errc chan error
}

// StreamLoadStats implements the service: it records every request and
// sends what the test gives to Send, until the client ends the stream or
// the test cuts it.
func (s *LRSServer) StreamLoadStats(gs grpc.BidiStreamingServer[lrsv3.LoadStatsRequest, lrsv3.LoadStatsResponse]) error {
	st := &LRSStream{
		reqs:  make(chan *lrsv3.LoadStatsRequest, 1024),
		sends: make(chan sendReq),
		cut:   make(chan error, 1),
		done:  make(chan struct{}),
	}
	defer close(st.done)
	select {
	case s.streams <- st:
	default:
		return errors.New("testutils: LRSServer: more than 64 streams nobody took with NextStream")
	}
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := gs.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case st.reqs <- req:
			case <-gs.Context().Done():
				return
			}
		}
	}()
	for {
		select {
		case err := <-recvErr:
			return err
		case err := <-st.cut:
			return err
		case <-gs.Context().Done():
			return gs.Context().Err()
		case sr := <-st.sends:
			sr.errc <- gs.Send(sr.resp)
		}
	}
}

// NextRequest returns the next LoadStatsRequest of the stream, waiting for
// it until ctx is done. A request already received is returned even if ctx
// is done, so a done ctx asks whether one is there.
func (st *LRSStream) NextRequest(ctx context.Context) (*lrsv3.LoadStatsRequest, error) {
	select {
	case r := <-st.reqs:
		return r, nil
	default:
	}
	select {
	case r := <-st.reqs:
		return r, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("testutils: no LoadStatsRequest: %w", ctx.Err())
	}
}

// Send sends resp on the stream.
func (st *LRSStream) Send(resp *lrsv3.LoadStatsResponse) error {
	sr := sendReq{resp: resp, errc: make(chan error, 1)}
	select {
	case st.sends <- sr:
		return <-sr.errc
	case <-st.done:
		return errors.New("testutils: the LRS stream has ended")
	}
}

// Cut ends the stream with err (nil: OK), as a server going away would.
func (st *LRSStream) Cut(err error) {
	select {
	case st.cut <- err:
	default:
	}
}

// Done is closed when the stream has ended, whichever side ended it.
func (st *LRSStream) Done() <-chan struct{} { return st.done }
