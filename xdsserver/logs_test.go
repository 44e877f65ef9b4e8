package xdsserver_test

import (
	"log"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// A server given neither a Logger nor a ServingModeCallback still says why
// it does not serve, as warnings to slog.Default() (as the client does with
// no logger): its Listener missing once the does-not-exist timer fires,
// rejected, or for another address; and it says when it serves again.
// Without these lines, all its operator would see is clients' connections
// reset.
//
// Not parallel: it replaces the process's default logger.
func TestNotServingIsLoggedWithoutCallback(t *testing.T) {
	e := newEnvOpts(t, envOptions{server: func(e *env, cfg *bootstrap.Config) []grpc.ServerOption {
		captureDefaultLog(t, e.warnings)
		opts := quietClient
		opts.WatchExpiry = 500 * time.Millisecond
		return []grpc.ServerOption{xdsserver.BootstrapConfig(cfg), xdsserver.ClientOptions(opts)}
	}})
	listener := " listener=" + e.name

	notServing := "xdsserver: not serving: connections are closed at accept address=" + e.lis.Addr().String() + listener
	t.Log(e.waitWarning(notServing + " error=" +
		(&client.Error{TypeURL: "type.googleapis.com/envoy.config.listener.v3.Listener", Name: e.name, Err: client.ErrResourceNotFound}).Error()))

	rejected := e.serverListener(nil, serverRoutes())
	rejected.UseOriginalDst = wrapperspb.Bool(true)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{rejected}})
	t.Log(e.waitWarning(notServing, "use_original_dst"))

	elsewhere := e.serverListener(nil, serverRoutes())
	elsewhere.Address = &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: "127.0.0.2", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: e.port},
	}}}
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{elsewhere}})
	t.Log(e.waitWarning(notServing, "address ("+net.JoinHostPort("127.0.0.2", strconv.Itoa(int(e.port)))+") in Listener update does not match listening address: ("+e.lis.Addr().String()+")"))

	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, serverRoutes())}})
	t.Log(e.waitWarning("xdsserver: serving again address=" + e.lis.Addr().String() + listener))
	if err := call(e.ctx, e.dial(), sayHello, waitForReady); err != nil {
		t.Errorf("serving again: %v", err)
	}
}

// captureDefaultLog sends the records of slog.Default() to ch until the
// test ends, and then restores the default logger and the log package's
// output (which slog.SetDefault redirects, and does not restore).
func captureDefaultLog(t *testing.T, ch chan string) {
	prev, prevOut, prevFlags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(warnings{ch}))
	t.Cleanup(func() {
		slog.SetDefault(prev)
		log.SetOutput(prevOut)
		log.SetFlags(prevFlags)
	})
}
