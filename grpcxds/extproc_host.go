package grpcxds

import (
	"net/url"
	"strings"

	"google.golang.org/grpc"
)

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
