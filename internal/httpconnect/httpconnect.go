package httpconnect

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

// DialFunc dials addr ("host:port") over TCP, or what stands for it.
type DialFunc = func(ctx context.Context, addr string) (net.Conn, error)

// scheme prefixes an address reached through an HTTP CONNECT proxy. It
// cannot be mistaken for a host:port, and a dialer that does not know it
// fails on it rather than connecting around the proxy.
const scheme = "goxds-http-connect:"

// Addr is the address of target ("host:port") reached through the HTTP
// CONNECT proxy at proxy ("ip:port"), for Dialer.
func Addr(proxy, target string) string { return scheme + proxy + "/" + target }

// ParseAddr undoes Addr; ok is false for any other address, a malformed
// one included (IsAddr tells those apart).
func ParseAddr(addr string) (proxy, target string, ok bool) {
	rest, found := strings.CutPrefix(addr, scheme)
	if !found {
		return "", "", false
	}
	proxy, target, ok = strings.Cut(rest, "/")
	if !ok || proxy == "" || target == "" {
		return "", "", false
	}
	return proxy, target, true
}

// IsAddr reports whether addr is meant for Dialer's tunnels (made by Addr
// or not): such an address must never be dialled directly.
func IsAddr(addr string) bool { return strings.HasPrefix(addr, scheme) }

// Dialer returns a dialer that reaches the addresses made by Addr through
// their proxy, and dials every other address with base. base also dials
// the proxies. nil base: DefaultDialer.
func Dialer(base DialFunc) DialFunc {
	if base == nil {
		base = DefaultDialer()
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		proxy, target, ok := ParseAddr(addr)
		if !ok {
			if IsAddr(addr) {
				return nil, fmt.Errorf("goxds: malformed HTTP CONNECT address %q", addr)
			}
			return base(ctx, addr)
		}
		return DialThrough(ctx, base, proxy, target)
	}
}

// DialThrough dials proxy with dial and asks it for a tunnel to target,
// which it returns. Errors name the proxy and the target.
func DialThrough(ctx context.Context, dial DialFunc, proxy, target string) (net.Conn, error) {
	conn, err := dial(ctx, proxy)
	if err != nil {
		return nil, fmt.Errorf("goxds: dialing HTTP CONNECT proxy %s for %s: %w", proxy, target, err)
	}
	tunnel, err := Tunnel(ctx, conn, target, "")
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("goxds: HTTP CONNECT proxy %s, tunnel to %s: %w", proxy, target, err)
	}
	return tunnel, nil
}

// DefaultDialer dials over TCP with net.Dialer's defaults, through the
// proxy the environment names for the address if any (EnvDialer with
// http.ProxyFromEnvironment). A custom dialer turns off grpc-go's own
// proxying from the environment, and this one does it in its place.
func DefaultDialer() DialFunc {
	return EnvDialer(http.ProxyFromEnvironment, func(ctx context.Context, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	})
}

// EnvDialer returns a dialer that reaches addr through the HTTP CONNECT
// proxy proxyFor names for it (asked about the URL https://addr, as
// grpc-go asks), with the proxy URL's user info as Basic
// Proxy-Authorization, and directly with dial when it names none. dial
// also dials the proxy.
func EnvDialer(proxyFor func(*http.Request) (*url.URL, error), dial DialFunc) DialFunc {
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
		tunnel, err := Tunnel(ctx, conn, addr, auth)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("goxds: proxy %s (from the environment), tunnel to %s: %w", proxy.Host, addr, err)
		}
		return tunnel, nil
	}
}

// Tunnel asks the proxy at the other end of conn for a tunnel to target,
// with auth as its Proxy-Authorization unless empty, and returns the
// tunnel. The exchange is bounded by ctx: the deadline is set on conn, and
// cancellation closes it. On error the caller closes conn.
func Tunnel(ctx context.Context, conn net.Conn, target, auth string) (net.Conn, error) {
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
	tunnel, err := exchange(conn, target, auth)
	close(done)
	<-stopped
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return tunnel, err
}

// exchange sends the CONNECT request and reads the answer.
func exchange(conn net.Conn, target, auth string) (net.Conn, error) {
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
