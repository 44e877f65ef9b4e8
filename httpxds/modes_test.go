package httpxds_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// TestModesLoggedWithoutCallback: without a ServingModeCallback, the log
// is told each reason for not serving once (a new Listener version for
// the same wrong address is no news), and serving again after it at the
// warning's level, so that a log showing the warning shows its end, as
// xdsserver's log does.
func TestModesLoggedWithoutCallback(t *testing.T) {
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
	// A client shared with the test, whose own watch of the Listener says
	// when a version has been delivered: the client's callbacks run in
	// order, so the server's watch has it before the next one.
	xc, err := client.New(cfg, quietClient)
	if err != nil {
		t.Fatal(err)
	}
	defer xc.Close()
	logs := make(records, 64)
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
	defer func() {
		srv.Close()
		<-done
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	e := &env{t: t, ctx: ctx, ms: ms, name: "http/server?xds.resource.listening_address=" + lis.Addr().String(),
		port: uint32(lis.Addr().(*net.TCPAddr).Port)}
	delivered := make(chan string, 8)
	stop := client.Watch(xc, resources.ListenerType, e.name, client.WatcherFuncs[*resources.Listener]{
		OnUpdate: func(l *resources.Listener) { delivered <- l.Server.FilterChains[0].Name },
	})
	defer stop()
	// publish publishes l and waits until the client has delivered it.
	publish := func(l *listenerv3.Listener) {
		t.Helper()
		e.update(testutils.Resources{Listeners: []*listenerv3.Listener{l}})
		for want := l.FilterChains[0].Name; ; {
			select {
			case got := <-delivered:
				if got == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("the Listener with chain %q was not delivered", want)
			}
		}
	}
	elsewhere := func(chain string) *listenerv3.Listener {
		l := e.listener(routes("rc", serveRoute(prefix("/"))), "", nil)
		l.Address.GetSocketAddress().PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: e.port + 1}
		l.FilterChains[0].Name = chain
		return l
	}
	publish(elsewhere("first"))
	publish(elsewhere("second"))
	publish(e.listener(routes("rc", serveRoute(prefix("/"))), "", nil))

	var notServing []string
	for {
		var got string
		select {
		case got = <-logs:
		case <-ctx.Done():
			t.Fatalf("no serving line logged; not serving logged %q", notServing)
		}
		if strings.Contains(got, "httpxds: not serving") {
			notServing = append(notServing, got)
			continue
		}
		if strings.Contains(got, "httpxds: serving") {
			if !strings.HasPrefix(got, "WARN httpxds: serving again") {
				t.Errorf("logged %q after not serving, want a warning that it serves again", got)
			}
			break
		}
	}
	if len(notServing) != 1 || !strings.Contains(notServing[0], "not for the listening address") {
		t.Errorf("not serving logged %d times: %q, want once, for the address", len(notServing), notServing)
	}
}
