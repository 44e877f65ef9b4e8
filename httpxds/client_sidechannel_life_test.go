package httpxds_test

import (
	"net/http"
	"testing"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// An update that moves the client's ext_authz filter to another service
// closes the channel to the old one once the check in flight on it has
// finished: that request completes. An update that keeps the service
// keeps its channel.
func TestClientExtAuthzSideChannelClosedAfterUpdate(t *testing.T) {
	oldSvc, newSvc := testutils.StartHeldAuthz(t), testutils.StartHeldAuthz(t)
	e := newCEnv(t, cenvOptions{edit: func(c *bootstrap.Config) {
		testutils.AllowGRPCService(oldSvc.Target())(c)
		c.AllowedGRPCServices[newSvc.Target()] = c.AllowedGRPCServices[oldSvc.Target()]
	}})
	b := newBackend(t, "a")
	e.update(authzWorld(b, testutils.ExtAuthzFilter(oldSvc.Target(), nil)))
	if got := e.get("/x"); got.status != http.StatusOK {
		t.Fatalf("request checked by the first service: %d %q", got.status, got.body)
	}

	held := make(chan error, 1)
	go func() {
		req, err := http.NewRequest(http.MethodGet, "http://"+svcHost+"/x", nil)
		if err == nil {
			req.Header.Set("X-Want", "hold")
			var got response
			if got, err = e.do(req); err == nil && got.status != http.StatusOK {
				err = &statusError{got}
			}
		}
		held <- err
	}()
	select {
	case <-oldSvc.Entered:
	case <-e.ctx.Done():
		t.Fatal("the held check never reached the first service")
	}

	// Once the host has taken a configuration, the side channels have
	// been told what it names.
	checkedBy := func(target string) func(*watchers.Snapshot) bool {
		return func(s *watchers.Snapshot) bool {
			for _, f := range s.Listener.HTTPFilters {
				if c, ok := f.Parsed.(*resources.ExtAuthzConfig); ok && c.GrpcService.TargetURI == target {
					return true
				}
			}
			return false
		}
	}
	e.update(authzWorld(b, testutils.ExtAuthzFilter(newSvc.Target(), nil)))
	e.waitConfig(svcHost, "ext_authz calling the second service", checkedBy(newSvc.Target()))
	if got := e.get("/x"); got.status != http.StatusOK || len(newSvc.Checks()) != 1 {
		t.Fatalf("request after the update: %d %q, %d checks at the second service, want 200 and 1", got.status, got.body, len(newSvc.Checks()))
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
}

type statusError struct{ r response }

func (e *statusError) Error() string {
	return "status " + http.StatusText(e.r.status) + ": " + e.r.body
}
