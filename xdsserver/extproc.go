package xdsserver

import (
	"context"
	"net/netip"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/internal/extprocgrpc"
	"github.com/goxds/xds/resources"
)

// The external processing filter (gRFC A93) on the server: the RPC's
// events go to the processor as dataplane/extproc's Call decides, and
// internal/extprocgrpc binds the Call to grpc-go's server API (the
// client's headers while the chain's filters run, the rest of the RPC
// around the handler: ServeUnary, ServeStream). What is here is the
// server's: the filter's configuration, the channel to the processor
// (the server's, kept while a Listener version in force names it) and the
// server's metrics.

// extProc starts an external processing filter on an RPC to method: f is
// the chain's filter and cfg its effective configuration. It returns
// extprocgrpc.StartServerRPC's filter state for the rest of the RPC and
// the context the RPC goes on with, or the status the RPC fails with.
func (s *GRPCServer) extProc(ctx context.Context, f *resources.HTTPFilter, cfg resources.HTTPFilterConfig,
	method string, md metadata.MD, local, remote netip.AddrPort) (*extprocgrpc.ServerRPC, context.Context, error) {
	c, err := resources.ExtProcOf(cfg, f.Parsed)
	if err != nil {
		return nil, ctx, s.rpcError(codes.Internal, "HTTP filter %q: %v", f.Name, err)
	}
	proc := s.withProcMetrics(extproc.New(s.procOwner, c, extprocgrpc.ClientOrFailing(&s.authzChannels, c.GrpcService)))
	return extprocgrpc.StartServerRPC(ctx, c, proc, method, md, local, remote)
}
