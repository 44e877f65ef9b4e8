package grpcxds

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/goxds/xds/internal/h2settings"
	"github.com/goxds/xds/internal/httpconnect"
)

// HTTP CONNECT (gRFC A86). grpc-go tunnels inside its transport, keyed by
// internal address attributes; goxds has only public APIs, and the one
// place a channel lets a library act on a new connection is its dialer,
// which sees nothing of the address but its Addr string. So the balancer
// writes the whole instruction into Addr: an endpoint of an
// http_11_proxy cluster whose metadata names a proxy
// (cluster.EndpointSpec.Proxy) gets the Addr httpconnect.Addr(proxy,
// target), and the dialer that Builder.DialOptions installs
// (ConnectDialer) recognises it, dials the proxy and asks it for a tunnel
// to the target. Stateless: no table to keep in step with the balancer,
// and a SubConn's address stays meaningful for as long as gRPC holds it.
// ServerName is left alone, so :authority is still the channel's and TLS
// (xdscreds, run by the transport over the tunnel) still names the
// backend. The dial itself is internal/httpconnect's, shared with httpxds.

// proxiedAddrs returns the addresses the balancer connects to for an
// endpoint's addresses reached through proxy (A86: an endpoint without a
// proxy address is reached directly, and not given to this).
func proxiedAddrs(proxy string, addresses []string) []string {
	addrs := make([]string, len(addresses))
	for i, a := range addresses {
		addrs[i] = httpconnect.Addr(proxy, a)
	}
	return addrs
}

// errNoConnectDialer is the error of a proxied endpoint on a channel
// without the goxds dial options: such a channel's dialer cannot tunnel,
// and connecting directly would bypass the proxy the configuration names.
func errNoConnectDialer(addr string) error {
	proxy, target, _ := httpconnect.ParseAddr(addr)
	return fmt.Errorf("endpoint %s is to be reached through HTTP CONNECT proxy %s (gRFC A86), "+
		"which needs the dialer of grpcxds's dial options (Builder.DialOptions or grpcxds.NewClient)", target, proxy)
}

// ConnectDialer returns a dialer for grpc.WithContextDialer that reaches
// the endpoints of http_11_proxy clusters (gRFC A86) through their HTTP
// CONNECT proxy and dials every other address with base (nil: TCP with
// net.Dialer's defaults). Builder.DialOptions installs ConnectDialer(nil);
// a channel given its own grpc.WithContextDialer after those options
// replaces it, and must wrap its dialer instead:
//
//	grpc.WithContextDialer(grpcxds.ConnectDialer(myDialer))
//
// base also dials the proxy itself. A custom dialer turns off grpc-go's own
// proxying from the environment (HTTPS_PROXY, NO_PROXY), so the default
// base does it instead: an address the environment sends to a proxy is
// reached through an HTTP CONNECT tunnel of that proxy, with its user
// info as Basic Proxy-Authorization, as grpc-go does. A base of your own
// gets no such help.
//
// It also lets connection scaling (gRFC A105) read the HTTP/2 settings of
// plaintext connections (scale.go); a replacement dialer without it
// leaves every endpoint one connection.
func ConnectDialer(base func(ctx context.Context, addr string) (net.Conn, error)) func(ctx context.Context, addr string) (net.Conn, error) {
	d := httpconnect.Dialer(base)
	return func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := d(ctx, addr)
		if err != nil {
			return nil, err
		}
		// gRPC gives the dialer the address's attributes as the
		// handshake's; the balancer put a Limit there when the
		// connection is plaintext and its endpoint may scale.
		if l := h2settings.LimitFrom(credentials.ClientHandshakeInfoFromContext(ctx).Attributes, h2settings.Dialer); l != nil {
			return l.Wrap(c), nil
		}
		return c, nil
	}
}
