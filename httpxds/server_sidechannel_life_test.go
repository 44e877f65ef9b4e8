package httpxds_test

import (
	"net/http"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

// A Listener update that moves the HTTP server's ext_authz filter to
// another service closes the channel to the old one once the check in
// flight on it has finished: that request completes. An update that
// keeps the service keeps its channel.
func TestServerExtAuthzSideChannelClosedAfterUpdate(t *testing.T) {
	oldSvc, newSvc := testutils.StartHeldAuthz(t), testutils.StartHeldAuthz(t)
	e := newEnv(t, envOptions{handler: authzHandler, edit: func(c *bootstrap.Config) {
		testutils.AllowGRPCService(oldSvc.Target())(c)
		c.AllowedGRPCServices[newSvc.Target()] = c.AllowedGRPCServices[oldSvc.Target()]
	}})
	// gen is a version whose route tells the service its generation, in
	// check_settings' context_extensions.
	gen := func(target, g string) {
		r := serveRoute(prefix("/"))
		r.TypedPerFilterConfig = map[string]*anypb.Any{"authz": testutils.MarshalAny(&extauthzv3.ExtAuthzPerRoute{
			Override: &extauthzv3.ExtAuthzPerRoute_CheckSettings{CheckSettings: &extauthzv3.CheckSettings{ContextExtensions: map[string]string{"gen": g}}}})}
		e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.listener(routes("rc", r), "", nil, testutils.ExtAuthzFilter(target, nil))}})
	}
	gen(oldSvc.Target(), "1")
	e.waitMode(httpxds.ServingModeServing)
	e.want(e.get("/x"), http.StatusOK, "x-authz=")

	held := make(chan error, 1)
	go func() {
		req, err := http.NewRequest(http.MethodGet, "http://"+e.lis.Addr().String()+"/x", nil)
		if err == nil {
			req.Header.Set("X-Want", "hold")
			hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			var resp *http.Response
			if resp, err = hc.Do(req.WithContext(e.ctx)); err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = &statusError{response{status: resp.StatusCode}}
				}
			}
		}
		held <- err
	}()
	select {
	case <-oldSvc.Entered:
	case <-e.ctx.Done():
		t.Fatal("the held check never reached the first service")
	}

	// The filter moves to the second service; then a version that keeps
	// it (generation 3 on its route). The server takes Listener updates
	// one at a time, so once generation 3 is checked it is done with the
	// update that moved the filter in full.
	gen(newSvc.Target(), "2")
	for len(newSvc.Checks()) == 0 {
		e.want(e.get("/x"), http.StatusOK, "x-authz=")
	}
	gen(newSvc.Target(), "3")
	for {
		e.want(e.get("/x"), http.StatusOK, "x-authz=")
		checks := newSvc.Checks()
		if checks[len(checks)-1].Request.GetAttributes().GetContextExtensions()["gen"] == "3" {
			break
		}
	}

	close(oldSvc.Release)
	if err := <-held; err != nil {
		t.Fatalf("request whose check was in flight across the update: %v", err)
	}
	if err := oldSvc.Conns.WaitEnded(e.ctx, 1); err != nil {
		t.Fatalf("the first service's connection was not closed after the update: %v", err)
	}
	if begun, _ := oldSvc.Conns.Counts(); begun != 1 {
		t.Errorf("%d connections to the first service, want 1", begun)
	}
	if begun, ended := newSvc.Conns.Counts(); begun != 1 || ended != 0 {
		t.Errorf("second service: %d connections begun, %d ended; want one kept across the update that kept it", begun, ended)
	}
}
