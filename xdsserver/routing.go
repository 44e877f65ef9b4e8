package xdsserver

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/authz"
	"github.com/goxds/xds/internal/serverconn"
	"github.com/goxds/xds/resources"
)

// unary routes and authorizes a unary RPC of the generation, and runs it
// through the chain's filters that take part in its response (external
// processing, external authorization's response headers), if any.
func (g *generation) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	layers, err := g.check(&ctx, info.FullMethod)
	if len(layers) > 0 {
		return serveUnary(ctx, layers, req, handler, err)
	}
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// stream routes and authorizes a streaming RPC of the generation, and
// runs it through the chain's filters that take part in its response, as
// unary does.
func (g *generation) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	layers, err := g.check(&ctx, info.FullMethod)
	if len(layers) > 0 {
		return serveStream(ctx, srv, ss, layers, handler, err)
	}
	if err != nil {
		return err
	}
	if ctx != ss.Context() {
		ss = serverStream{ss, ctx} // a filter changed its metadata
	}
	return handler(srv, ss)
}

// check applies the connection's filter chain to an RPC (gRFC A36): the
// virtual host for its authority and the first route that matches, which
// must be non-forwarding, then the chain's HTTP filters with the route's
// and virtual host's overrides. The filter chain is found again from the
// connection's addresses: a generation's Listener never changes, so it is
// the one the connection was accepted with. *ctxp is the RPC's context,
// which a filter may replace (ext_authz and ext_proc changing its
// metadata). The filters that take part in the response (external
// processing filters started, external authorization's response headers)
// are returned, even with an error (a filter after them failed the RPC),
// for the caller to run the rest of the RPC through.
func (g *generation) check(ctxp *context.Context, method string) ([]layer, error) {
	ctx := *ctxp
	p, ok := peer.FromContext(ctx)
	if !ok || p.LocalAddr == nil || p.Addr == nil {
		return nil, status.Error(codes.Internal, "xdsserver: RPC without peer addresses")
	}
	local, lok := serverconn.AddrPort(p.LocalAddr)
	remote, rok := serverconn.AddrPort(p.Addr)
	if !lok || !rok {
		return nil, status.Error(codes.Internal, "xdsserver: RPC with peer addresses that are not IP")
	}
	s := g.l.s
	fc := authz.FindFilterChain(g.gen.Config, local, remote)
	if fc == nil {
		return nil, s.rpcError(codes.Unavailable, "no filter chain for the connection from %s to %s", remote, local)
	}
	rc, err := g.l.core.Routes().Config(fc)
	if err != nil {
		return nil, s.rpcError(codes.Unavailable, "error from xDS configuration for matched route configuration: %v", err)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	var authority string
	if a := md[":authority"]; len(a) > 0 {
		authority = a[0]
	}
	vh := resources.FindVirtualHost(rc.VirtualHosts, authority)
	if vh == nil {
		return nil, s.rpcError(codes.Unavailable, "the incoming RPC did not match a configured Virtual Host: authority %q, route configuration %q", authority, rc.Name)
	}
	var route *resources.Route
	for _, r := range vh.Routes {
		if matchRoute(r, method, md) {
			route = r
			break
		}
	}
	if route == nil {
		return nil, s.rpcError(codes.Unavailable, "the incoming RPC did not match a configured Route: %s in virtual host %q", method, vh.Name)
	}
	if route.Action != resources.RouteActionNonForwarding {
		// gRFC A36: a server only serves routes that say so.
		return nil, s.rpcError(codes.Unavailable, "the incoming RPC matched to a route that was not of action type non forwarding: %s matched a route whose action is %v", method, route.Action)
	}
	var layers []layer
	err = g.runFilters(ctxp, &layers, fc, vh, route, method, md, local, remote, p)
	return layers, err
}

// runFilters runs the chain's HTTP filters, each with its most specific
// override (route, then virtual host). A filter this server has no code
// for (a type registered with ServerSide but no runtime here) is skipped
// if it is optional, as gRFC A39 says of an unsupported optional filter,
// and otherwise fails the RPC: it may be a security filter.
// *ctxp is the RPC's context, which ext_authz and ext_proc may replace;
// the filters that take part in the response are appended to *layers.
func (g *generation) runFilters(ctxp *context.Context, layers *[]layer, fc *resources.FilterChain, vh *resources.VirtualHost, route *resources.Route,
	method string, md metadata.MD, local, remote netip.AddrPort, p *peer.Peer) error {
	s := g.l.s
	for i := range fc.HTTPFilters {
		f := &fc.HTTPFilters[i]
		cfg, on := f.EffectiveConfig(route.FilterOverrides, vh.FilterOverrides)
		if !on {
			continue
		}
		switch c := cfg.(type) {
		case *resources.RouterConfig:
			// The terminal filter: the RPC goes to its handler.
		case *resources.ExtAuthzConfig, *resources.ExtAuthzPerRouteConfig:
			ctx, hdrs, err := s.extAuthz(*ctxp, f, c, method, md, local, remote, p, g.served.leaf(local, remote))
			if err != nil {
				return err
			}
			if hdrs != nil {
				*layers = append(*layers, layer{hdrs: hdrs})
			}
			*ctxp = ctx
			md, _ = metadata.FromIncomingContext(ctx)
		case *resources.ExtProcConfig, *resources.ExtProcPerRouteConfig:
			pr, ctx, err := s.extProc(*ctxp, f, c, method, md, local, remote)
			if err != nil {
				return err
			}
			*layers = append(*layers, layer{proc: pr})
			*ctxp = ctx
			md, _ = metadata.FromIncomingContext(ctx)
		case *resources.RBACConfig:
			if c.Rules == nil {
				continue
			}
			// Every gRPC request is a POST.
			req := &authz.Request{Method: "POST", Path: method, Headers: md, Local: local, Remote: remote}
			if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
				req.TLS, req.PeerCertificates = true, ti.State.PeerCertificates
				if ti.SPIFFEID != nil {
					req.Principal = ti.SPIFFEID.String()
				}
			}
			if ok, policy := authz.Authorize(c.Rules, req); !ok {
				if policy != "" {
					return status.Errorf(codes.PermissionDenied, "xdsserver: RBAC: %s matched deny policy %q", method, policy)
				}
				return status.Errorf(codes.PermissionDenied, "xdsserver: RBAC: %s matched no allow policy", method)
			}
		default:
			// As httpxds's server and both clients treat a filter they
			// cannot run (dataplane/httpfilter): Envoy's is_optional says
			// whether it may be left out.
			if f.IsOptional {
				continue
			}
			return s.rpcError(codes.Unavailable, "listener %q: HTTP filter %q of type %s has no server implementation", g.l.core.Name(), f.Name, f.TypeURL)
		}
	}
	return nil
}

// matchRoute reports whether r matches an RPC to method with metadata md,
// as on the client (gRFC A28): a header's values joined with ","; binary
// headers never match.
func matchRoute(r *resources.Route, method string, md metadata.MD) bool {
	return r.MatchGRPC(method, func(name string) (string, bool) {
		if strings.HasSuffix(name, "-bin") {
			return "", false
		}
		vs := md[name]
		return strings.Join(vs, ","), len(vs) > 0
	})
}

// rpcError is the status an RPC fails with because of the configuration:
// prefixed, as gRPC's are, with the xDS node ID, the first thing to look
// up on the management server.
func (s *GRPCServer) rpcError(c codes.Code, format string, args ...any) error {
	return status.Error(c, s.configError(format, args...).Error())
}

// configError is an error the configuration caused, naming the xDS node
// ID as gRPC's do ("[xDS node id: ...]"), so that what was written against
// grpc-go's errors matches goxds's.
func (s *GRPCServer) configError(format string, args ...any) error {
	return fmt.Errorf("xdsserver: [xDS node id: %s]: %s", s.opts.bootstrap.Node.ID, fmt.Sprintf(format, args...))
}
