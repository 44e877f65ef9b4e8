package grpcxds

import (
	"net/url"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/internal/extprocgrpc"
	"github.com/goxds/xds/resources"
)

// The external processing filter (gRFC A93) on a channel's RPCs. The
// chain's run (dataplane/httpfilter) sends the RPC's headers to the
// processor; internal/extprocgrpc runs the rest of the RPC through the
// filter's session (the interceptors call it once per RPC, outside its
// retry attempts: ClientRPC, InvokeUnary). What is here is the
// selection's side: the headers the processor replaces and the host it
// is told.

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

// Host is the authority the RPC is sent with, as the external processing
// filter's request.host attribute (gRFC A93, A106): a grpc.CallAuthority
// call option's, else the channel's default, the endpoint of its target
// (gRPC's rule; a channel dialled with grpc.WithAuthority, which gRPC
// does not let an interceptor read, has that instead). An authority a
// route rewrites (gRFC A81) is the attempt's, after the filters.
func (s *selection) Host() string {
	for _, o := range s.opts {
		if a, ok := o.(grpc.AuthorityOverrideCallOption); ok && a.Authority != "" {
			return a.Authority
		}
	}
	if s.cc == nil {
		return ""
	}
	u, err := url.Parse(s.cc.Target())
	if err != nil {
		return ""
	}
	ep := u.Path
	if ep == "" {
		ep = u.Opaque
	}
	return strings.TrimPrefix(ep, "/")
}
