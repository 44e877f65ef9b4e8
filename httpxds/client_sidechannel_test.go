package httpxds_test

import (
	"io"
	"net/http"
	"slices"
	"testing"

	"google.golang.org/grpc"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

// The Transport's checks with the authorization service (gRFC A92) go on
// side channels made with TransportOptions.SideChannelDialOptions, in the
// request's context: a tracing stats handler there sees the request's
// trace, and makes the check its child span.
func TestClientSideChannelCarriesTheRequestContext(t *testing.T) {
	a, err := testutils.StartAuthzServer(authzDecide)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	side := new(testutils.TraceTagger)
	e := newCEnv(t, cenvOptions{edit: testutils.AllowGRPCService(a.Target()), opts: func(o *httpxds.TransportOptions) {
		o.SideChannelDialOptions = []grpc.DialOption{grpc.WithStatsHandler(side)}
	}})
	e.update(authzWorld(newBackend(t, "a"), testutils.ExtAuthzFilter(a.Target(), nil)))
	for _, trace := range []string{"req-1", "req-2"} {
		req, err := http.NewRequestWithContext(testutils.WithTrace(e.ctx, trace), http.MethodGet, "http://"+svcHost+"/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-want", "allow")
		resp, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d, want the backend's 200", trace, resp.StatusCode)
		}
	}
	want := []testutils.TraceSeen{{Method: testutils.AuthzCheckMethod, Trace: "req-1"}, {Method: testutils.AuthzCheckMethod, Trace: "req-2"}}
	if got := side.Seen(); !slices.Equal(got, want) {
		t.Errorf("the side channel's stats handler saw %v, want %v", got, want)
	}
}
