package httpxds_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

// countingClient is an HTTP/1.1 keep-alive or HTTP/2 (prior knowledge)
// client that counts the connections it dials and tells on ends when one
// of them is closed (a read fails).
type countingClient struct {
	e     *env
	tr    *http.Transport
	dials atomic.Int32
	ends  chan struct{}
}

func newCountingClient(e *env, h2 bool) *countingClient {
	c := &countingClient{e: e, ends: make(chan struct{}, 16)}
	p := new(http.Protocols)
	if h2 {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	c.tr = &http.Transport{Protocols: p, MaxConnsPerHost: 1, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c.dials.Add(1)
		return &endConn{Conn: conn, ends: c.ends}, nil
	}}
	e.t.Cleanup(c.tr.CloseIdleConnections)
	return c
}

// endConn signals once when a read fails: the connection is closed.
type endConn struct {
	net.Conn
	ends chan struct{}
	once atomic.Bool
}

func (c *endConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && c.once.CompareAndSwap(false, true) {
		c.ends <- struct{}{}
	}
	return n, err
}

func (c *countingClient) get(path string) response {
	c.e.t.Helper()
	req, _ := http.NewRequestWithContext(c.e.ctx, "GET", "http://svc.test"+path, nil)
	req.URL.Host = c.e.lis.Addr().String()
	req.Host = "svc.test"
	resp, err := c.tr.RoundTrip(req)
	if err != nil {
		c.e.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: strings.TrimSpace(string(b)), header: resp.Header}
}

// waitBody waits until a request for path on a new connection is answered
// body: the server has taken an update in. The connections under test are
// not used for it.
func (e *env) waitBody(path, body string) {
	e.t.Helper()
	for {
		got := e.get(path)
		if got.body == body {
			return
		}
		// The server's configuration changes only when it handles an
		// update: ask again after the next one (a token left by one
		// handled since the request is taken at once).
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("GET %s: still %d %q, want %q", path, got.status, got.body, body)
		case <-e.applied:
		}
	}
}

// rbacPerRoute is typed_per_filter_config for the filter named "rbac"
// that denies every request of the route.
func rbacPerRouteDenyAll() map[string]*anypb.Any {
	return map[string]*anypb.Any{"rbac": testutils.MarshalAny(&rbacfilterv3.RBACPerRoute{Rbac: &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{
		Action: rbacv3.RBAC_DENY,
		Policies: map[string]*rbacv3.Policy{"deny-all": {
			Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_Any{Any: true}}},
			Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
		}},
	}}})}
}

// TestRouteUpdateReachesOpenConnections: a RouteConfiguration update over
// RDS (a route added, one removed, an RBAC policy of a route changed)
// applies to the next request of a keep-alive HTTP/1.1 connection and of
// an HTTP/2 connection opened before it, which stay open (Envoy applies
// an RDS update to the streams that start after it, on the same
// connections).
func TestRouteUpdateReachesOpenConnections(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		name := "HTTP/1.1"
		if h2 {
			name = "HTTP/2"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			rbacOff := &hcmv3.HttpFilter{Name: "rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(&rbacfilterv3.RBAC{})}}
			l := e.listener(nil, "rc", nil, rbacOff)
			e.serve(l, routes("rc",
				directRoute(prefix("/version"), 200, "v1"),
				serveRoute(prefix("/a")),
				serveRoute(prefix("/b"))))
			c := newCountingClient(e, h2)
			e.want(c.get("/a"), http.StatusOK, "served GET /a")
			e.want(c.get("/b"), http.StatusOK, "served GET /b")
			e.want(c.get("/new"), http.StatusNotFound, `no route for host "svc.test" path "/new"`)

			denied := serveRoute(prefix("/a"))
			denied.TypedPerFilterConfig = rbacPerRouteDenyAll()
			e.update(testutils.Resources{Listeners: []*listenerv3.Listener{l}, Routes: []*routev3.RouteConfiguration{routes("rc",
				directRoute(prefix("/version"), 200, "v2"),
				denied,
				directRoute(prefix("/new"), 200, "new route"))}})
			e.waitBody("/version", "v2")

			e.want(c.get("/a"), http.StatusForbidden, "RBAC: access denied")
			e.want(c.get("/new"), http.StatusOK, "new route")
			e.want(c.get("/b"), http.StatusNotFound, `no route for host "svc.test" path "/b"`)
			if n := c.dials.Load(); n != 1 {
				t.Errorf("the client dialed %d connections, want 1: the update closed the open one", n)
			}
		})
	}
}

// keepAlive is a raw HTTP/1.1 keep-alive connection.
type keepAlive struct {
	e *env
	c net.Conn
	r *bufio.Reader
}

func (e *env) keepAlive() *keepAlive {
	e.t.Helper()
	c, err := net.Dial("tcp", e.lis.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(testTimeout))
	return &keepAlive{e: e, c: c, r: bufio.NewReader(c)}
}

func (k *keepAlive) send(path string) {
	k.e.t.Helper()
	if _, err := io.WriteString(k.c, "GET "+path+" HTTP/1.1\r\nHost: svc.test\r\n\r\n"); err != nil {
		k.e.t.Fatal(err)
	}
}

func (k *keepAlive) read() (response, bool) {
	k.e.t.Helper()
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		k.e.t.Fatalf("reading a response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: strings.TrimSpace(string(b)), header: resp.Header}, resp.Close
}

// waitClosed waits until the server closes the connection.
func (k *keepAlive) waitClosed() {
	k.e.t.Helper()
	if n, err := k.r.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		k.e.t.Errorf("read %d bytes, %v from a connection the server should have drained, want EOF", n, err)
	}
}

// TestListenerUpdateDrainsOldConnections: a new Listener version is
// served by a new http.Server and the old one is shut down gracefully, as
// the package doc says (Envoy drains the connections of a Listener
// replaced; gRFC A36 has a server drain them): an idle keep-alive
// HTTP/1.1 connection is closed, a request in progress finishes and its
// connection closes after it, an HTTP/2 connection is told GOAWAY and
// closed, and the client's next request is served by the new version on
// a new connection.
func TestListenerUpdateDrainsOldConnections(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	e := newEnv(t, envOptions{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
			io.WriteString(w, "finished")
			return
		}
		echo(w, r)
	})})
	rc1 := routes("rc1", directRoute(prefix("/version"), 200, "L1"), serveRoute(prefix("/")))
	rc2 := routes("rc2", directRoute(prefix("/version"), 200, "L2"), serveRoute(prefix("/")))
	e.serve(e.listener(nil, "rc1", nil), rc1, rc2)

	idle := e.keepAlive()
	idle.send("/idle")
	if got, closing := idle.read(); got.status != http.StatusOK || closing {
		t.Fatalf("got %d %q (close %v), want 200 on a keep-alive connection", got.status, got.body, closing)
	}
	busy := e.keepAlive()
	busy.send("/slow")
	select {
	case <-started:
	case <-e.ctx.Done():
		t.Fatal("the slow request did not start")
	}
	h2 := newCountingClient(e, true)
	e.want(h2.get("/version"), http.StatusOK, "L1")

	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.listener(nil, "rc2", nil)}, Routes: []*routev3.RouteConfiguration{rc1, rc2}})
	e.waitBody("/version", "L2")

	idle.waitClosed()
	select {
	case <-h2.ends:
	case <-e.ctx.Done():
		t.Fatal("the HTTP/2 connection of the old Listener version is still open")
	}
	e.want(h2.get("/version"), http.StatusOK, "L2")
	if n := h2.dials.Load(); n != 2 {
		t.Errorf("the HTTP/2 client dialed %d connections, want 2", n)
	}

	close(release)
	got, closing := busy.read()
	if got.status != http.StatusOK || got.body != "finished" {
		t.Errorf("the request in progress got %d %q, want 200 finished", got.status, got.body)
	}
	if !closing {
		t.Error("the response of the drained connection does not say Connection: close")
	}
	busy.waitClosed()
}

// TestNotServingDrainsOpenConnections: when the Listener is deleted (by a
// server marked fail_on_data_errors, gRFC A88) the address stops serving
// and the connections open are drained too, as the package doc says: an
// idle keep-alive connection is closed, an HTTP/2 one told GOAWAY and
// closed.
func TestNotServingDrainsOpenConnections(t *testing.T) {
	e := newEnv(t, envOptions{edit: func(c *bootstrap.Config) {
		c.Servers[0].ServerFeatures = append(c.Servers[0].ServerFeatures, bootstrap.FeatureFailOnDataErrors)
	}})
	e.serve(e.listener(routes("rc", serveRoute(prefix("/"))), "", nil))
	idle := e.keepAlive()
	idle.send("/idle")
	if got, closing := idle.read(); got.status != http.StatusOK || closing {
		t.Fatalf("got %d %q (close %v), want 200 on a keep-alive connection", got.status, got.body, closing)
	}
	h2 := newCountingClient(e, true)
	e.want(h2.get("/h2"), http.StatusOK, "served GET /h2")

	e.update(testutils.Resources{})
	e.waitMode(httpxds.ServingModeNotServing)
	idle.waitClosed()
	select {
	case <-h2.ends:
	case <-e.ctx.Done():
		t.Fatal("the HTTP/2 connection is still open after the Listener was deleted")
	}
}
