package grpcxds

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/dataplane/httpfilter"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/internal/extprocgrpc"
	"github.com/goxds/xds/resources"
)

// The external processing filter (gRFC A93) on a channel's RPCs. The
// chain's run (start) sends the RPC's headers to the processor and
// applies its answer to the outgoing metadata, like any filter's change;
// what is here hands the processor the rest of the RPC and the RPC what
// the processor answers: the request messages and half-close, the
// response headers, messages and trailers, before the application sees
// them. Messages are serialized protocol buffers (gRFC A93's GRPC body
// mode): grpc-go's interceptors see decoded messages, so a message is
// marshalled for the processor and the processor's unmarshalled into the
// RPC's type, only when a body mode sends them.
//
// The filter runs once per RPC, outside its retry attempts, as every HTTP
// filter of the channel does (gRFC A39 places them above the retry code,
// as grpc-go's interceptors and C-core's dynamic filters run): the
// processor sees the RPC the application made, and what it answers is
// what every attempt sends. The ext_proc stream is one per RPC (gRFC A93),
// so a retry cannot send the processor a second set of headers.

// procClients gives external processing clients on the channels the
// channel keeps for its filters' services (gRFC A102).
type procClients struct{ ch *extauthzgrpc.Channels }

// ProcClient implements httpfilter.ProcClients.
func (p procClients) ProcClient(gs *resources.GrpcService) (extproc.Client, error) {
	return extprocgrpc.NewClient(p.ch, gs)
}

// ReplaceHeaders implements httpfilter.HeaderReplacer: the RPC goes on
// with h as its outgoing metadata.
func (s *selection) ReplaceHeaders(h map[string][]string) {
	md := metadata.MD(h)
	s.Context = metadata.NewOutgoingContext(s.Context, md)
	s.md, s.mdRead = md, true
}

// callOptions are opts with, when a filter's processor gives the RPC's
// request messages, the identity compressor last (the last one given
// wins): gRFC A93 has the processor's messages sent uncompressed, since
// whether the application's could be (a sensitive payload) does not
// carry over to them.
func (ps *procSet) callOptions(opts []grpc.CallOption) []grpc.CallOption {
	for _, p := range ps.procs {
		if p.Config.Modes.RequestBody && !p.Config.ObservabilityMode {
			return append(opts[:len(opts):len(opts)], grpc.UseCompressor(encoding.Identity))
		}
	}
	return opts
}

// procSet is the external processing filters of one RPC, in the chain's
// order, and the RPC's cancel, which a filter failing the RPC (an
// immediate response, a failed stream) calls: the RPC ends at once, as
// an out-of-band cancellation (gRFC A93).
type procSet struct {
	procs  []*httpfilter.Proc
	appCtx context.Context // the application's
	ctx    context.Context // appCtx, cancelled by cancel: the filters' waits
	cancel context.CancelFunc
	stops  []func() bool

	mu     sync.Mutex
	failed error // the adapter's own failure of the RPC (a message it cannot take)
}

// failWith fails the RPC with err, unless it failed already.
func (ps *procSet) failWith(err error) {
	ps.mu.Lock()
	if ps.failed == nil {
		ps.failed = err
	}
	ps.mu.Unlock()
	ps.cancel()
}

// newProcSet returns the context the RPC goes on with (ctx, start's),
// cancelled when a filter of procs fails it. The filters' own waits end
// with appCtx, the application's: start's ends when the RPC's selection
// is released (a route timeout's context), which the retrying stream
// does when the server's end comes, before the filters have handed it to
// their processors.
func newProcSet(appCtx, ctx context.Context, procs []*httpfilter.Proc) (context.Context, *procSet) {
	ctx, cancel := context.WithCancel(ctx)
	wctx, wcancel := context.WithCancel(appCtx)
	ps := &procSet{procs: procs, appCtx: appCtx, ctx: wctx, cancel: func() { cancel(); wcancel() }, stops: make([]func() bool, len(procs))}
	for i, p := range procs {
		p.WatchUntil(appCtx)
		call := p.Call
		ps.stops[i] = context.AfterFunc(call.Context(), func() {
			if call.Err() != nil {
				cancel()
			}
		})
	}
	return ctx, ps
}

// failure is the status the first filter that failed the RPC gave, with
// the trailers it gives (nil: none failed it). The application's cancel
// (or deadline) comes first: it ends the processing streams too, which
// the filters would otherwise report as failed.
func (ps *procSet) failure() (error, metadata.MD) {
	if err := ps.appCtx.Err(); err != nil {
		return status.FromContextError(err).Err(), nil
	}
	for _, p := range ps.procs {
		if err := p.Call.Err(); err != nil {
			var st *extproc.Status
			var t metadata.MD
			if errors.As(err, &st) && st.Trailers != nil {
				t = stripStatus(st.Trailers)
			}
			return extprocgrpc.Status(err), t
		}
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.failed, nil
}

// finish ends the filters' work on the RPC, which ended with err, and
// returns the status it ends with: a filter's failure comes first.
func (ps *procSet) finish(err error) error {
	if ps == nil {
		return err
	}
	if f, _ := ps.failure(); f != nil {
		err = f
	}
	for _, stop := range ps.stops {
		stop()
	}
	for i := len(ps.procs) - 1; i >= 0; i-- {
		ps.procs[i].Release()
	}
	ps.cancel()
	return err
}

// withStatus is t with the RPC's status as grpc-status and grpc-message,
// as the processor sees trailers.
func withStatus(t metadata.MD, rpcErr error) map[string][]string {
	out := t.Copy()
	if out == nil {
		out = metadata.MD{}
	}
	st := status.Convert(rpcErr)
	out["grpc-status"] = []string{strconv.Itoa(int(st.Code()))}
	if st.Message() != "" {
		out["grpc-message"] = []string{st.Message()}
	}
	return out
}

// stripStatus is t less the status, which gRPC gives the application as
// the RPC's error, not among its trailers.
func stripStatus(t map[string][]string) metadata.MD {
	md := metadata.MD(t).Copy()
	delete(md, "grpc-status")
	delete(md, "grpc-message")
	return md
}

// setCallOptions puts the response headers and trailers the filters
// left in the RPC's grpc.Header and grpc.Trailer call options, which
// gRPC filled with the server's.
func setCallOptions(opts []grpc.CallOption, header, trailer metadata.MD) {
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			if o.HeaderAddr != nil {
				*o.HeaderAddr = header.Copy()
			}
		case grpc.TrailerCallOption:
			if o.TrailerAddr != nil {
				*o.TrailerAddr = trailer.Copy()
			}
		}
	}
}

// procPrefix starts the client side's ext_proc error texts.
const procPrefix = "goxds: ext_proc"

// unaryProc runs a unary RPC through the external processing filters
// procs: its request through each (in the chain's order), the RPC's
// attempts (invoke), then its response through each, the filter nearest
// the server first.
func (cs *channelState) unaryProc(appCtx, ctx context.Context, procs []*httpfilter.Proc, req, reply any, opts []grpc.CallOption,
	invoke func(ctx context.Context, req any, opts []grpc.CallOption) error) error {
	ctx, ps := newProcSet(appCtx, ctx, procs)
	opts = ps.callOptions(opts)
	for _, p := range procs {
		if p.Config.Modes.RequestBody {
			r, err := extprocgrpc.UnaryRequest(ps.ctx, p.Call, procPrefix, req)
			if err != nil {
				return ps.finish(err)
			}
			req = r
		}
	}
	var header, trailer metadata.MD
	callOpts := append(opts[:len(opts):len(opts)], grpc.Header(&header), grpc.Trailer(&trailer))
	err := invoke(ctx, req, callOpts)
	if f, t := ps.failure(); f != nil {
		setCallOptions(opts, nil, t)
		return withholdReply(procs, reply, ps.finish(f))
	}
	for i := len(procs) - 1; i >= 0; i-- {
		header, trailer, err = unaryResponse(ps.ctx, procs[i], header, trailer, reply, err)
	}
	if f, t := ps.failure(); f != nil && t != nil {
		trailer = t
	}
	setCallOptions(opts, header, trailer)
	return withholdReply(procs, reply, ps.finish(err))
}

// withholdReply empties reply when a unary RPC fails (err) through procs
// not all in observability mode: gRPC wrote the server's message there,
// which a processor did not pass on (an immediate response, a failed
// stream, headers it did not let through), and the RPC fails as if
// cancelled (gRFC A93), without it. It returns err.
func withholdReply(procs []*httpfilter.Proc, reply any, err error) error {
	if err == nil {
		return nil
	}
	for _, p := range procs {
		if !p.Config.ObservabilityMode {
			if pm, ok := reply.(proto.Message); ok {
				proto.Reset(pm)
			}
			break
		}
	}
	return err
}

// unaryResponse runs a unary RPC's response, which ended with rpcErr,
// through the processor of p: its headers (none: a Trailers-Only
// response, told to the processor as headers ending the stream), its
// message, into reply, and its trailers. It returns the headers, trailers
// and status the RPC goes on with.
func unaryResponse(ctx context.Context, p *httpfilter.Proc, header, trailer metadata.MD, reply any, rpcErr error) (metadata.MD, metadata.MD, error) {
	c, m := p.Call, p.Config.Modes
	observe := p.Config.ObservabilityMode
	if header == nil {
		if m.ResponseHeaders {
			out, err := c.ServerHeaders(withStatus(trailer, rpcErr), true)
			if err != nil {
				return nil, trailer, extprocgrpc.Status(err)
			}
			if !observe {
				trailer = stripStatus(out)
			}
		}
		return nil, trailer, rpcErr
	}
	if m.ResponseHeaders {
		out, err := c.ServerHeaders(header, false)
		if err != nil {
			return header, trailer, extprocgrpc.Status(err)
		}
		if !observe {
			header = metadata.MD(out)
		}
	}
	var got [][]byte
	var gotErr error
	collected := make(chan struct{})
	sendBody := m.ResponseBody && rpcErr == nil
	if sendBody {
		_, b, err := extprocgrpc.Marshal(procPrefix, "the response", reply)
		if err != nil {
			return header, trailer, err
		}
		// The processor's messages are read as they come, so that many of
		// them do not hold up its answer to the trailers.
		go func() {
			defer close(collected)
			for {
				b, ok, err := c.NextServerMessage(ctx)
				if err != nil || !ok {
					gotErr = err
					return
				}
				got = append(got, b)
			}
		}()
		if err := c.ServerMessage(b); err != nil {
			c.Done() // ends the reader
			<-collected
			return header, trailer, extprocgrpc.Status(err)
		}
	} else {
		close(collected)
	}
	out, terr := c.ServerTrailers(withStatus(trailer, rpcErr))
	<-collected
	if terr != nil {
		return header, trailer, extprocgrpc.Status(terr)
	}
	if gotErr != nil {
		return header, trailer, extprocgrpc.Status(gotErr)
	}
	if !observe {
		trailer = stripStatus(out)
	}
	if sendBody && !observe {
		if len(got) != 1 {
			return header, trailer, status.Errorf(codes.Internal, "goxds: ext_proc: the processor gave %d response messages for a unary RPC, want 1", len(got))
		}
		pm := reply.(proto.Message)
		proto.Reset(pm)
		if err := extprocgrpc.Unmarshal(procPrefix, "response", got[0], pm); err != nil {
			return header, trailer, err
		}
	}
	return header, trailer, rpcErr
}
