package grpcxds

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/internal/deadline"
	"github.com/goxds/xds/resources"
)

// What routing decides for an RPC, and the rules it follows, is
// dataplane/route's. This file is gRPC's side of it: the RPC's headers as
// gRPC shows them, the selection kept for the RPC's life, and routing's
// errors as gRPC statuses.

// selection is one RPC as the goxds interceptors started it: the route and
// the cluster chosen, fixed for the RPC's life and every attempt of it
// (gRFC A31), so that an RPC waiting for its cluster is not drawn again at
// each new picker; its policy; and scratch for its unary attempts.
//
// It is also the RPC's context: the context the interceptors hand gRPC is
// the application's with the selection as its value (selectionKey), in one
// allocation with the rest, where context.WithValue would make another.
type selection struct {
	context.Context // the application's

	gen     uint64 // the configuration's generation
	method  string // the RPC's full method, as routed
	route   *resources.Route
	cluster string // "" for a route whose plugin picks the cluster
	// hash is the RPC's request hash for ring_hash, computed once, as
	// grpc-go does: an RPC whose route hashes nothing gets one random hash,
	// not a new one at each pick.
	hash    uint64
	timeout time.Duration // 0: none
	retry   *route.RetryPolicy
	filters []route.FilterConfig

	// md is the RPC's outgoing metadata, read at the first header routing
	// or a filter asks for (mdRead); only start uses them.
	md metadata.MD
	// cc and opts are the RPC's channel and call options, for its
	// authority (Host), which only the filters that ask read.
	cc   *grpc.ClientConn
	opts []grpc.CallOption

	// A unary RPC's attempts, one at a time on the RPC's goroutine: the
	// header and trailer of the last one, and the call option that gets
	// the header when the application gave none (unary). The trailer is
	// the one gRPC hands the pick's Done (pickFor), when wantTrailer:
	// grpc.Trailer would copy it once more.
	header, trailer metadata.MD
	attemptOpts     [1]grpc.CallOption

	// release ends what start began for the RPC: what the filters
	// started, and the deadline's context.WithTimeout (nil: nothing).
	// finish calls it once (ended).
	release func()

	// The route's deadline, when the selection carries it (deadline.go).
	// Set by startDeadline before the selection is shared.
	deadline deadline.Carrier

	// Small fields side by side, where alignment would waste less: the
	// struct is allocated per RPC.
	mdRead      bool
	wantTrailer bool
	// statusPick: the last pick failed with a status error (a drop, a
	// circuit breaker, no route), which gRPC hands the RPC without any
	// retry.
	statusPick atomic.Bool
	ended      atomic.Bool
}

// finish ends what start began for the RPC, once (a stream may end by
// more than one path): what the filters started, and the deadline. A nil
// selection (an RPC gRPC fails itself) began nothing.
func (s *selection) finish() {
	if s == nil || s.ended.Swap(true) {
		return
	}
	if s.release != nil {
		s.release()
	}
	if s.deadline.Carries() {
		s.endDeadline()
	}
}

// selectionKey is the context key of an RPC's *selection.
type selectionKey struct{}

// Value implements context.Context.
func (s *selection) Value(key any) any {
	if _, ok := key.(selectionKey); ok {
		return s
	}
	return s.Context.Value(key)
}

// selectionOf returns the selection of an RPC, or nil for an RPC that did
// not pass through the goxds interceptors.
func selectionOf(ctx context.Context) *selection {
	s, _ := ctx.Value(selectionKey{}).(*selection)
	return s
}

// Get implements route.Headers with the RPC's outgoing metadata.
func (s *selection) Get(name string) (string, bool) { return s.metadata().Get(name) }

// Last implements route.Headers.
func (s *selection) Last(name string) (string, bool) { return s.metadata().Last(name) }

func (s *selection) metadata() route.GRPCHeaders {
	if !s.mdRead {
		s.md, _ = metadata.FromOutgoingContext(s.Context)
		s.mdRead = true
	}
	return route.GRPCHeaders(s.md)
}

// grpcRetryOn are the retry_on conditions gRPC retries on (gRFC A44), by
// the bit route.RetryPolicy gives them: their status code. Envoy's HTTP
// conditions do not apply to gRPC.
var grpcRetryOn = map[string]uint{
	"cancelled":          uint(codes.Canceled),
	"deadline-exceeded":  uint(codes.DeadlineExceeded),
	"internal":           uint(codes.Internal),
	"resource-exhausted": uint(codes.ResourceExhausted),
	"unavailable":        uint(codes.Unavailable),
}

// routes returns the routing table of the configuration, made at its
// first RPC, or taken from prev (nil: none) when prev routes the same
// virtual host and listener: an update of endpoints keeps the routes'
// parsed policies.
func (c *channelConfig) routes(prev *route.Table) *route.Table {
	if t := c.table.Load(); t != nil {
		return t
	}
	var vh *resources.VirtualHost
	var l *resources.Listener
	if c.snap != nil {
		vh, l = c.snap.VirtualHost, c.snap.Listener
	}
	t := prev
	if t == nil || !t.For(vh, l) {
		t = route.NewTable(vh, l, route.Options{RetryOn: grpcRetryOn})
	}
	c.table.CompareAndSwap(nil, t)
	return c.table.Load()
}

// selectInto routes the RPC of sel to method, and fills sel in; prev is
// the last routing table of the channel (channelConfig.routes).
func (c *channelConfig) selectInto(sel *selection, method string, channelID uint64, prev *atomic.Pointer[route.Table]) error {
	var t *route.Table
	if t = c.table.Load(); t == nil {
		var last *route.Table
		if prev != nil {
			last = prev.Load()
		}
		t = c.routes(last)
		if prev != nil {
			prev.Store(t)
		}
	}
	var d route.Decision
	if err := t.Route(&route.Request{Path: method, Headers: sel, ChannelID: channelID}, &d); err != nil {
		return routeStatus(err, method, c.nodeID)
	}
	if c.chain != nil && c.chain.err != nil {
		return status.Errorf(codes.Unavailable, "goxds: RPC %s, route %s: %v (xDS node ID %q)", method, route.Describe(d.Route), c.chain.err, c.nodeID)
	}
	sel.gen, sel.method, sel.route, sel.cluster, sel.hash = c.gen, method, d.Route, d.Cluster, d.Hash
	sel.retry, sel.filters = d.Retry, d.Filters
	if c.snap != nil {
		sel.timeout = route.GRPCTimeout(d.Route, c.snap.Listener)
	}
	return nil
}

// routeStatus is the status an RPC to method fails with when routing
// fails with err: UNAVAILABLE, saying why in gRPC's terms, and naming the
// xDS node ID when the interceptors report it (the picker has none).
func routeStatus(err error, method, nodeID string) error {
	node := ""
	if nodeID != "" {
		node = fmt.Sprintf(" (xDS node ID %q)", nodeID)
	}
	re, ok := err.(*route.Error)
	if !ok {
		return status.Errorf(codes.Unavailable, "goxds: RPC %s: %v%s", method, err, node)
	}
	switch re.Kind {
	case route.NoRoute:
		return status.Errorf(codes.Unavailable, "goxds: no route matches RPC %s%s", method, node)
	case route.NotForwarding:
		return status.Errorf(codes.Unavailable,
			"goxds: RPC %s matched route %s, whose action %v a gRPC client cannot carry out%s", method, route.Describe(re.Route), re.Route.Action, node)
	case route.NoCluster:
		return status.Errorf(codes.Unavailable, "goxds: RPC %s matched route %s, which names no cluster%s", method, route.Describe(re.Route), node)
	case route.ClusterNotConfigured:
		return status.Errorf(codes.Unavailable, "goxds: route %s names cluster %q, which is not configured%s", route.Describe(re.Route), re.Cluster, node)
	}
	return status.Errorf(codes.Unavailable, "goxds: RPC %s: %v%s", method, err, node)
}
