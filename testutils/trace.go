package testutils

import (
	"context"
	"slices"
	"sync"

	"google.golang.org/grpc/stats"
)

// The side-channel tests' stand-in for a trace (gRFC A92, A93: the call to
// an authorization or processing service is a child span of the
// data-plane RPC's): a value in the RPC's context, which a tracer's span
// would be, and a stats handler on the side channel that records what it
// finds there, as a tracer's handler would read its parent span.

type traceKey struct{}

// WithTrace returns ctx carrying trace, as a tracer's span would be.
func WithTrace(ctx context.Context, trace string) context.Context {
	return context.WithValue(ctx, traceKey{}, trace)
}

// TraceOf is the trace ctx carries ("" for none).
func TraceOf(ctx context.Context) string {
	s, _ := ctx.Value(traceKey{}).(string)
	return s
}

// TraceSeen is an RPC as a TraceTagger saw it start: its method and the
// trace its context carried.
type TraceSeen struct{ Method, Trace string }

// TraceTagger is a grpc stats.Handler that records, for each RPC that
// starts (TagRPC), its method and the trace its context carries. With Tag
// set it also gives each RPC a trace of its own, Tag + the method, as a
// server's tracing handler starts a span for each RPC it serves. The zero
// value is ready to use.
type TraceTagger struct {
	// Tag, if not empty, prefixes the trace TagRPC puts in each RPC's
	// context.
	Tag string

	mu   sync.Mutex
	seen []TraceSeen
}

// TagRPC implements stats.Handler.
func (h *TraceTagger) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	h.mu.Lock()
	h.seen = append(h.seen, TraceSeen{Method: info.FullMethodName, Trace: TraceOf(ctx)})
	h.mu.Unlock()
	if h.Tag != "" {
		ctx = WithTrace(ctx, h.Tag+info.FullMethodName)
	}
	return ctx
}

// HandleRPC implements stats.Handler.
func (*TraceTagger) HandleRPC(context.Context, stats.RPCStats) {}

// TagConn implements stats.Handler.
func (*TraceTagger) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

// HandleConn implements stats.Handler.
func (*TraceTagger) HandleConn(context.Context, stats.ConnStats) {}

// Seen returns the RPCs started so far, oldest first.
func (h *TraceTagger) Seen() []TraceSeen {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}

// Methods of the side channels' RPCs, as a TraceTagger records them.
const (
	AuthzCheckMethod  = "/envoy.service.auth.v3.Authorization/Check"
	ProcProcessMethod = "/envoy.service.ext_proc.v3.ExternalProcessor/Process"
)
