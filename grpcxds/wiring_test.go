package grpcxds_test

import (
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// sharedClientBuilder returns a Builder on a client the test made from a
// bootstrap with the given listener name template, as a program that
// shares its goxds client with its channels does.
func sharedClientBuilder(t *testing.T, e *env, template string) *grpcxds.Builder {
	t.Helper()
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: e.ms.Address(), NodeID: nodeID, ClientDefaultListenerResourceNameTemplate: template,
	}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b, err := grpcxds.NewBuilder(grpcxds.Options{Client: c, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A Builder given a client names listeners with that client's bootstrap:
// "goxds:///greeter" is the Listener "mesh/greeter" when the template is
// "mesh/%s".
func TestSharedClientListenerTemplate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	res := tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a))
	res.Listeners = []*listenerv3.Listener{testutils.Listener("mesh/"+listener, "greeter-route")}
	e.update(res)
	b := sharedClientBuilder(t, e, "mesh/%s")
	conn, err := grpc.NewClient("goxds:///"+listener, grpc.WithResolvers(b), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil || got != "a" {
		t.Errorf("RPC to goxds:///%s with template mesh/%%s: served by %q, %v; want a", listener, got, err)
	}
}

// An RPC failing because its listener does not exist names the listener
// and the node ID, as grpc-go's do, so that users can grep for either.
func TestMissingListenerErrorNamesNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := call(e.ctx, e.dial(), grpc.WaitForReady(true))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `"`+listener+`"`) || !strings.Contains(err.Error(), nodeID) {
		t.Errorf("RPC failed with %v; want UNAVAILABLE naming listener %q and node ID %q", err, listener, nodeID)
	}
}

// A target whose authority is not in the bootstrap fails its RPCs with an
// error that names the authority, with a shared client too.
func TestUnknownAuthorityNamed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for name, b := range map[string]*grpcxds.Builder{"own client": e.builder, "shared client": sharedClientBuilder(t, e, "")} {
		conn, err := grpc.NewClient("goxds://no-such-authority/"+listener, grpc.WithResolvers(b), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = call(e.ctx, conn)
		conn.Close()
		if err == nil || !strings.Contains(err.Error(), `"no-such-authority"`) || !strings.Contains(err.Error(), "not in the bootstrap") {
			t.Errorf("%s: RPC to an unknown authority: %v; want an error naming the authority", name, err)
		}
	}
}
