package testutils

import (
	"context"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
)

// HeldAuthz is an authorization service (AuthzServer) that allows every
// check but holds one whose request header x-want is "hold" until Release
// is closed, having said on Entered that it is in, and whose connections
// Conns counts: for tests of a side channel's life across configuration
// updates (a check in flight when the update comes).
type HeldAuthz struct {
	*AuthzServer
	// Conns counts the connections the service accepts and closes.
	Conns ConnEvents
	// Entered receives once each time a held check is in.
	Entered chan struct{}
	// Release, closed, lets every held check (and those to come) go on.
	Release chan struct{}
}

// StartHeldAuthz starts a HeldAuthz, stopped when t ends.
func StartHeldAuthz(t testing.TB) *HeldAuthz {
	t.Helper()
	h := &HeldAuthz{Entered: make(chan struct{}, 1), Release: make(chan struct{})}
	var err error
	h.AuthzServer, err = StartAuthzServer(func(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		for _, hv := range req.GetAttributes().GetRequest().GetHttp().GetHeaderMap().GetHeaders() {
			if hv.GetKey() == "x-want" && string(hv.GetRawValue()) == "hold" {
				h.Entered <- struct{}{}
				select {
				case <-h.Release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}}, nil
	}, h.Conns.ServerOption())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h
}
