package httpxds_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// TestH2C: a chain without TLS serves HTTP/2 with prior knowledge too.
func TestH2C(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.serve(e.listener(routes("rc", serveRoute(prefix("/"))), "", nil))
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(e.ctx, "GET", "http://"+e.lis.Addr().String()+"/h2c", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.Proto != "HTTP/2.0" || string(b) != "served GET /h2c /h2c" {
		t.Errorf("got %s %q, want HTTP/2.0 served", resp.Proto, b)
	}
}

// records is a slog.Handler that sends each record's message and
// attributes to a channel.
type records chan string

func (r records) Enabled(context.Context, slog.Level) bool { return true }
func (r records) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	select {
	case r <- b.String():
	default:
	}
	return nil
}
func (r records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r records) WithGroup(string) slog.Handler      { return r }

// TestSharedClientAndLoggedModes: a server on a shared client (not closed
// by the server) whose registry has RegisterServerFilters accepts a
// Listener with the fault filter; without a ServingModeCallback, not
// serving is logged as a warning naming the Listener and why. A shared
// client without RegisterServerFilters NACKs the same Listener, as a gRPC
// server's client does.
func TestSharedClientAndLoggedModes(t *testing.T) {
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Stop()
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerListenerResourceNameTemplate = template
	newClient := func(register bool) *client.Client {
		opts := quietClient
		opts.Registry = resources.DefaultRegistry().Clone()
		if register {
			if err := httpxds.RegisterServerFilters(opts.Registry); err != nil {
				t.Fatal(err)
			}
		}
		c, err := client.New(cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, register := range []bool{true, false} {
		xc := newClient(register)
		logs := make(records, 16)
		srv, err := httpxds.NewServer(echo, httpxds.Options{Client: xc, Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(lis) }()
		e := &env{t: t, name: "http/server?xds.resource.listening_address=" + lis.Addr().String(), port: uint32(lis.Addr().(*net.TCPAddr).Port)}
		l := e.listener(routes("rc", serveRoute(prefix("/"))), "", nil, faultFilter(503))
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		if err := ms.Update(ctx, nodeID, testutils.Resources{Listeners: []*listenerv3.Listener{l}}); err != nil {
			t.Fatal(err)
		}
		want := "INFO httpxds: serving"
		if !register {
			want = "WARN httpxds: not serving"
		}
		for got := ""; !strings.HasPrefix(got, want); {
			select {
			case got = <-logs:
				if !register && strings.HasPrefix(got, want) && !strings.Contains(got, `cannot run on a gRPC server`) {
					t.Errorf("not serving because of %s, want the fault filter refused", got)
				}
			case <-ctx.Done():
				t.Fatalf("register %v: no log line %q", register, want)
			}
		}
		srv.Close()
		if err := <-done; err != httpxds.ErrServerClosed {
			t.Errorf("Serve = %v", err)
		}
		// The shared client is the caller's: still open, it still answers
		// a watch.
		told := make(chan struct{}, 2)
		stop := client.Watch(xc, resources.ListenerType, e.name, client.WatcherFuncs[*resources.Listener]{
			OnUpdate:        func(*resources.Listener) { told <- struct{}{} },
			OnResourceError: func(error) { told <- struct{}{} },
		})
		select {
		case <-told:
		case <-ctx.Done():
			t.Errorf("register %v: the shared client no longer answers after the server closed", register)
		}
		stop()
		cancel()
		xc.Close()
	}
}
