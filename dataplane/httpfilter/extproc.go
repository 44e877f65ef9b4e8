package httpfilter

import (
	"context"
	"errors"
	"fmt"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/resources"
)

// ProcClients gives the client of an external processing service named
// by a filter's GrpcService (gRFC A102): internal/extprocgrpc's client on
// the transport's channels. A transport that cannot carry a request's
// messages to a processor sets none in its Env, and the filter cannot run
// there.
type ProcClients interface {
	ProcClient(gs *resources.GrpcService) (extproc.Client, error)
}

// HeaderReplacer is a Request whose headers an external processor can
// replace wholesale: the processor answers with the headers to send, not
// with a list of changes.
type HeaderReplacer interface {
	ReplaceHeaders(h map[string][]string)
}

// Proc is an external processing filter (gRFC A93) that runs on a request
// past its headers: the transport hands the call the request's messages,
// its half-close and the whole response (server headers, messages,
// trailers), in order, and calls Release once the request is over (which
// Result.Release also does).
type Proc struct {
	// Filter is the filter's name in the listener.
	Filter string
	// Config is the filter's effective configuration: its Modes say which
	// events the transport hands the call, its ObservabilityMode whether
	// the call changes anything.
	Config *resources.ExtProcConfig
	// Call is the filter on this request; its ClientHeaders already ran.
	Call *extproc.Call
	// stop undoes the watch that ends the call with the request's context.
	stop func() bool
}

// WatchUntil has the call end when ctx does, no longer with the context
// the chain ran with: a transport whose request context ends (a route
// timeout's, released) before it has handed the call the response's end
// gives the one that outlives it. Called before the call is shared.
func (p *Proc) WatchUntil(ctx context.Context) {
	p.stop()
	p.stop = context.AfterFunc(ctx, p.Call.Done)
}

// Release ends the filter's work on the request; it may be called more
// than once.
func (p *Proc) Release() {
	p.stop()
	p.Call.Done()
}

// procRuntime runs the external processing filter's first step, the
// request's headers, as a chain runs its filters; the rest of the
// request is the transport's, through the Proc it returns.
type procRuntime struct {
	name string
	// top is the filter's top-level configuration, which an
	// ExtProcPerRoute override changes field by field.
	top     resources.HTTPFilterConfig
	clients ProcClients
	// owner is the life of every Processor's streams; its end closes
	// them, a deferred close included.
	owner context.Context
	// metrics is Env.ProcMetrics.
	metrics func(req Request) extproc.Metrics
}

// Start implements Runtime for the chain's registry; a chain calls
// startProc instead, which hands back the rest of the request.
func (r *procRuntime) Start(ctx context.Context, config resources.HTTPFilterConfig, req Request) (func(), []extauthz.Mutation, *Denial) {
	p, d := r.startProc(ctx, config, req)
	if d != nil {
		return nil, nil, d
	}
	return p.Release, nil, nil
}

// startProc sends the request's headers (its metadata, with :path and
// :method, which the metadata lacks) to the processor when the
// processing mode says so, and the request goes on with those it answers.
// A failure the filter ends the request with is a Denial: the processor's
// immediate response as it gave it, or INTERNAL for a failed stream.
func (r *procRuntime) startProc(ctx context.Context, config resources.HTTPFilterConfig, req Request) (*Proc, *Denial) {
	c, err := resources.ExtProcOf(config, r.top)
	if err != nil {
		msg := fmt.Sprintf("ext_proc filter %q: %v", r.name, err)
		return nil, &Denial{Filter: r.name, Code: codeInternal, Message: msg, HTTPStatus: 500, Body: msg + "\n"}
	}
	rep, ok := req.(HeaderReplacer)
	if !ok {
		msg := fmt.Sprintf("ext_proc filter %q: the transport cannot replace a request's headers", r.name)
		return nil, &Denial{Filter: r.name, Code: codeInternal, Message: msg, HTTPStatus: 500, Body: msg + "\n"}
	}
	areq := req.AuthzRequest()
	var attrs map[string]any
	if len(c.RequestAttributes) > 0 || len(c.ResponseAttributes) > 0 {
		// gRFC A93's attributes, of gRFC A106's names, that a client knows
		// before the RPC is sent.
		attrs = extproc.RequestAttributes(areq.Path, areq.Headers)
		if h, ok := req.(interface{ Host() string }); ok {
			if host := h.Host(); host != "" {
				attrs["request.host"] = host
			}
		}
	}
	proc := extproc.New(r.owner, c, r.client(c.GrpcService))
	if r.metrics != nil {
		if m := r.metrics(req); m != nil {
			proc = proc.WithMetrics(m)
		}
	}
	call := proc.NewCall(ctx, attrs)
	// The request's end (its deadline, its cancel) ends the filter's waits
	// for the processor, this first one included.
	p := &Proc{Filter: r.name, Config: c, Call: call, stop: context.AfterFunc(ctx, call.Done)}
	if !c.Modes.RequestHeaders {
		return p, nil
	}
	out, err := call.ClientMetadata(areq.Path, areq.Headers)
	if err != nil {
		p.Release()
		d := procDenial(r.name, err)
		if ctx.Err() != nil {
			d.Err = ctx.Err() // the request's end, not the processor's doing
		}
		return nil, d
	}
	if c.ObservabilityMode {
		return p, nil
	}
	rep.ReplaceHeaders(out)
	return p, nil
}

// procDenial is the Denial of a request the filter failed with err: a
// *extproc.Status (its message as the processor gave it), or INTERNAL.
func procDenial(name string, err error) *Denial {
	var st *extproc.Status
	if errors.As(err, &st) {
		return &Denial{Filter: name, Code: st.Code, Message: st.Message, MessageAsIs: true, HTTPStatus: 500, Body: st.Message + "\n"}
	}
	msg := fmt.Sprintf("ext_proc filter %q: %v", name, err)
	return &Denial{Filter: name, Code: codeInternal, Message: msg, HTTPStatus: 500, Body: msg + "\n"}
}

// client is the client of gs's service; one that fails to open every
// stream when none can be had, for failure_mode_allow to decide.
func (r *procRuntime) client(gs *resources.GrpcService) extproc.Client {
	cl, err := r.clients.ProcClient(gs)
	if err != nil {
		return extproc.FailingClient(err)
	}
	return cl
}
