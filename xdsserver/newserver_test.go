package xdsserver_test

import (
	"strings"
	"testing"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// NewGRPCServer's errors begin with gRPC's words for the same failure, so
// that what was written against grpc-go's xds.NewGRPCServer still matches;
// goxds's detail follows.
func TestNewGRPCServerErrors(t *testing.T) {
	t.Setenv("GRPC_XDS_BOOTSTRAP", "")
	t.Setenv("GRPC_XDS_BOOTSTRAP_CONFIG", "")
	if _, err := xdsserver.NewGRPCServer(); err == nil || !strings.Contains(err.Error(), "failed to read xDS bootstrap config from env vars") {
		t.Errorf("NewGRPCServer with no bootstrap: %v; want an error saying the bootstrap could not be read from the environment", err)
	}
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "127.0.0.1:1", NodeID: "n"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerListenerResourceNameTemplate = ""
	if _, err := xdsserver.NewGRPCServer(xdsserver.BootstrapConfig(cfg)); err == nil ||
		!strings.Contains(err.Error(), "missing server_listener_resource_name_template in the bootstrap configuration") {
		t.Errorf("NewGRPCServer with no server_listener_resource_name_template: %v; want gRPC's error", err)
	}
}
