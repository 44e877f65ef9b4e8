package httpxds_test

import (
	"net/http"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/goxds/xds/testutils"
)

// TestDrainServesFirstRequest: an HTTP/1.1 connection accepted by the old
// Listener version that had not sent its first request when the new
// version took over is still answered once, with Connection: close, as
// Envoy drains a listener's connections. (net/http's Shutdown alone
// closes such a connection unanswered once its request comes: the client
// saw EOF on a connection it had just opened.)
func TestDrainServesFirstRequest(t *testing.T) {
	e := newEnv(t, envOptions{})
	rc1 := routes("rc1", directRoute(prefix("/version"), 200, "L1"), serveRoute(prefix("/")))
	rc2 := routes("rc2", directRoute(prefix("/version"), 200, "L2"), serveRoute(prefix("/")))
	e.serve(e.listener(nil, "rc1", nil), rc1, rc2)

	early := e.keepAlive()
	// Accepted after early, so answered once early was handed to the
	// version in force: the accept loop hands connections over in order.
	e.want(e.get("/version"), http.StatusOK, "L1")

	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.listener(nil, "rc2", nil)}, Routes: []*routev3.RouteConfiguration{rc1, rc2}})
	e.waitBody("/version", "L2")

	early.send("/version")
	got, closing := early.read()
	if got.status != http.StatusOK || got.body != "L1" {
		t.Errorf("the first request of a connection of the old version got %d %q, want 200 L1", got.status, got.body)
	}
	if !closing {
		t.Error("the response on the drained connection does not say Connection: close")
	}
	early.waitClosed()
}
