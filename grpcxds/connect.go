package grpcxds

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// HTTP CONNECT (gRFC A86). grpc-go tunnels inside its transport, keyed by
// internal address attributes; goxds has only public APIs, and the one
// place a channel lets a library act on a new connection is its dialer,
// which sees nothing of the address but its Addr string. So the balancer
// writes the whole instruction into Addr: an endpoint of an
// http_11_proxy cluster whose metadata names a proxy gets the Addr
// connectScheme + proxy + "/" + target, and the dialer that
// Builder.DialOptions installs (ConnectDialer) recognises it, dials the
// proxy and asks it for a tunnel to the target. Stateless: no table to
// keep in step with the balancer, and a SubConn's address stays
// meaningful for as long as gRPC holds it. ServerName is left alone, so
// :authority is still the channel's and TLS (xdscreds, run by the
// transport over the tunnel) still names the backend.

// connectScheme prefixes the Addr of an endpoint reached through an HTTP
// CONNECT proxy. It cannot be mistaken for a host:port, and a dialer that
// does not know it fails on it rather than connecting around the proxy.
const connectScheme = "goxds-http-connect:"

// connectAddr is the Addr of target reached through proxy.
func connectAddr(proxy, target string) string { return connectScheme + proxy + "/" + target }

// parseConnectAddr undoes connectAddr; ok is false for any other address.
func parseConnectAddr(addr string) (proxy, target string, ok bool) {
	rest, found := strings.CutPrefix(addr, connectScheme)
	if !found {
		return "", "", false
	}
	proxy, target, ok = strings.Cut(rest, "/")
	if !ok || proxy == "" || target == "" {
		return "", "", false
	}
	return proxy, target, true
}

// proxiedAddrs returns the addresses the balancer connects to for an
// endpoint's addresses reached through proxy: the cluster wraps its
// transport socket in http_11_proxy and the endpoint's metadata names the
// proxy (cluster.EndpointSpec.Proxy; A86: an endpoint without a proxy
// address is reached directly).
func proxiedAddrs(proxy string, addresses []string) []string {
	addrs := make([]string, len(addresses))
	for i, a := range addresses {
		addrs[i] = connectAddr(proxy, a)
	}
	return addrs
}

// errNoConnectDialer is the error of a proxied endpoint on a channel
// without the goxds dial options: such a channel's dialer cannot tunnel,
// and connecting directly would bypass the proxy the configuration names.
func errNoConnectDialer(addr string) error {
	proxy, target, _ := parseConnectAddr(addr)
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
func ConnectDialer(base func(ctx context.Context, addr string) (net.Conn, error)) func(ctx context.Context, addr string) (net.Conn, error) {
	if base == nil {
		base = envProxyDialer(httpsProxyFromEnvironment, func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		})
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		proxy, target, ok := parseConnectAddr(addr)
		if !ok {
			if strings.HasPrefix(addr, connectScheme) {
				return nil, fmt.Errorf("goxds: malformed HTTP CONNECT address %q", addr)
			}
			return base(ctx, addr)
		}
		conn, err := base(ctx, proxy)
		if err != nil {
			return nil, fmt.Errorf("goxds: dialing HTTP CONNECT proxy %s for %s: %w", proxy, target, err)
		}
		tunnel, err := connectThrough(ctx, conn, target, "")
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("goxds: HTTP CONNECT proxy %s, tunnel to %s: %w", proxy, target, err)
		}
		return tunnel, nil
	}
}

// connectThrough asks the proxy at the other end of conn for a tunnel to
// target and returns the tunnel. The exchange is bounded by ctx: the
// deadline is set on conn, and cancellation closes it.
func connectThrough(ctx context.Context, conn net.Conn, target, auth string) (net.Conn, error) {
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
		defer conn.SetDeadline(time.Time{})
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			conn.Close() // unblocks the exchange below
		case <-done:
		}
	}()
	tunnel, err := connectExchange(conn, target, auth)
	close(done)
	<-stopped
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return tunnel, err
}

// connectExchange sends the CONNECT request, with auth as its
// Proxy-Authorization unless empty, and reads the answer.
func connectExchange(conn net.Conn, target, auth string) (net.Conn, error) {
	// For CONNECT the request target is the authority (RFC 9110, section
	// 9.3.6): Request.Write sends URL.Opaque as it is.
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: target},
		Host:   target,
		Header: make(http.Header),
	}
	if auth != "" {
		req.Header.Set("Proxy-Authorization", auth)
	}
	if err := req.Write(conn); err != nil {
		return nil, fmt.Errorf("sending CONNECT: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("reading the CONNECT response: %w", err)
	}
	// A CONNECT response has no body to read: after a 200 the connection
	// is the tunnel, and after a refusal it is closed.
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("proxy answered %q", resp.Status)
	}
	if br.Buffered() > 0 {
		// The proxy sent tunnel bytes (the server's first frames) in the
		// same read as its answer: they must not be lost.
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufferedConn is a connection whose first bytes were read into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// httpsProxyFromEnvironment says which proxy, if any, the environment
// names for a request; the one grpc-go's own proxying consults.
var httpsProxyFromEnvironment = http.ProxyFromEnvironment

// envProxyDialer returns a dialer that reaches addr through the HTTP
// CONNECT proxy proxyFor names for it (as the URL https://addr), and
// directly with dial when it names none. dial also dials the proxy.
func envProxyDialer(proxyFor func(*http.Request) (*url.URL, error), dial func(context.Context, string) (net.Conn, error)) func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		proxy, err := proxyFor(&http.Request{URL: &url.URL{Scheme: "https", Host: addr}})
		if err != nil {
			return nil, fmt.Errorf("goxds: the proxy the environment names for %s: %w", addr, err)
		}
		if proxy == nil {
			return dial(ctx, addr)
		}
		conn, err := dial(ctx, proxy.Host)
		if err != nil {
			return nil, fmt.Errorf("goxds: dialing proxy %s (from the environment) for %s: %w", proxy.Host, addr, err)
		}
		var auth string
		if u := proxy.User; u != nil {
			pw, _ := u.Password()
			auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw))
		}
		tunnel, err := connectThrough(ctx, conn, addr, auth)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("goxds: proxy %s (from the environment), tunnel to %s: %w", proxy.Host, addr, err)
		}
		return tunnel, nil
	}
}
