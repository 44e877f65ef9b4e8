package grpcxds

import (
	"context"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/dataplane/httpfilter"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
)

// The HTTP filters of a listener run on every RPC of its channels (gRFC
// A39). Which run for an RPC, with what configuration, is
// dataplane/route's; what each does on a client (the fault and ext_authz
// runtimes, the registry by configuration type) is dataplane/httpfilter's,
// which the HTTP client shares. What is here is gRPC's binding: the RPC
// as the filters see it (its selection: extauthz.go), and a denial as the
// RPC's status (fault.go) and trailers (extauthz.go).

// filterEnv is what a channel keeps for its filters' runtimes, across
// configurations.
type filterEnv struct {
	// authz are the channels to external authorization services (gRFC
	// A92), closed once the configuration in force no longer names them
	// and their calls end, and with the channel's resolver; nil: none can
	// be made.
	authz *extauthzgrpc.Channels
	// authzMetrics, when not nil, counts the ext_authz checks of the
	// channel's RPCs, labelled target (Options.ExtAuthzMetrics).
	authzMetrics ExtAuthzMetrics
	target       string
	// procMetrics measures the external processing filters' events
	// (extprocmetrics.go); nil: not measured.
	procMetrics procMetricsFunc
}

// processFaults counts the faults of every channel: gRFC A33's
// max_active_faults caps the faults of the whole process, as grpc-go
// counts them, across channels and configuration updates.
var processFaults = route.NewFaults(nil)

// faultConfigName is the fault injection filter's configuration message.
const faultConfigName = httpfilter.FaultConfigName

// filterChain is what a channel runs of a listener's HTTP filters, made
// once per configuration.
type filterChain struct {
	*httpfilter.Chain
	// err is why the chain cannot run: every RPC fails with it.
	err error
	// authzMetrics and target are the env's.
	authzMetrics ExtAuthzMetrics
	target       string
}

// newFilterChain builds the chain of l's filters (httpfilter.NewChain)
// with what the channel keeps in env.
func newFilterChain(l *resources.Listener, env filterEnv) *filterChain {
	henv := httpfilter.Env{Client: "a gRPC client", Faults: processFaults, ProcMetrics: env.procMetrics}
	if env.authz != nil {
		henv.Authz = env.authz
		henv.Procs = procClients{env.authz}
	}
	c := httpfilter.NewChain(l, henv)
	return &filterChain{Chain: c, err: c.Err(), authzMetrics: env.authzMetrics, target: env.target}
}

// run runs the filters routing chose for the RPC of sel.
func (c *filterChain) run(ctx context.Context, sel *selection) httpfilter.Result {
	if c == nil || len(sel.filters) == 0 {
		return httpfilter.Result{}
	}
	if c.authzMetrics != nil {
		return c.Run(ctx, sel.filters, &authzObserved{selection: sel, m: c.authzMetrics, target: c.target})
	}
	return c.Run(ctx, sel.filters, sel)
}

// endedStream is the stream of an RPC a fault abort with status OK ended
// before it was sent: gRPC's outcome is a stream that is over, with no
// header and no message.
type endedStream struct{ ctx context.Context }

func (endedStream) Header() (metadata.MD, error) { return nil, nil }
func (endedStream) Trailer() metadata.MD         { return nil }
func (endedStream) CloseSend() error             { return nil }
func (s endedStream) Context() context.Context   { return s.ctx }
func (endedStream) SendMsg(any) error            { return io.EOF }
func (endedStream) RecvMsg(any) error            { return io.EOF }

var _ grpc.ClientStream = endedStream{}
