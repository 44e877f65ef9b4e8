package xdsserver_test

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// A server given only a shared client takes the Listener name template from
// that client's bootstrap, as grpcxds.Options{Client: c} does: the
// environment names no bootstrap, and none is needed.
func TestSharedClientBringsItsBootstrap(t *testing.T) {
	t.Setenv(bootstrap.EnvFile, "")
	t.Setenv(bootstrap.EnvConfig, "")
	e := newEnvOpts(t, envOptions{server: func(e *env, cfg *bootstrap.Config) []grpc.ServerOption {
		c, err := client.New(cfg, quietClient)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close) // after the server's Stop: cleanups run last first
		return []grpc.ServerOption{xdsserver.SharedClient(c), e.modeCallback()}
	}})
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, serverRoutes())}})
	e.waitMode(xdsserver.ServingModeServing)
	if err := call(e.ctx, e.dial(), sayHello); err != nil {
		t.Errorf("served through the shared client: %v", err)
	}
}
