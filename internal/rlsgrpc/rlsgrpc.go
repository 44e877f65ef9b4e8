// Package rlsgrpc binds the data plane's route lookup (dataplane/rls) to
// grpc-go: it checks that a lookup service's target is one grpc-go can
// dial, and speaks grpc.lookup.v1.RouteLookupService over a channel made
// as gRPC's RLS policy makes its control channel: the parent channel's
// authority, dialer and transport credentials. Package grpcxds uses it.
package rlsgrpc

import (
	"context"
	"fmt"
	"net/url"

	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/rls"
)

// lookupMethod is the lookup RPC's full name.
const lookupMethod = "/grpc.lookup.v1.RouteLookupService/RouteLookup"

// CheckTarget reports whether grpc-go can dial target: it must parse as a
// URI (or be one under the default scheme) whose scheme has a resolver
// registered, as gRPC's RLS policy requires of lookup_service.
func CheckTarget(target string) error {
	u, err := url.Parse(target)
	if err != nil {
		if u, err = url.Parse(resolver.GetDefaultScheme() + ":///" + target); err != nil {
			return fmt.Errorf("lookup_service %q is not a valid target URI", target)
		}
	}
	scheme := u.Scheme
	if scheme == "" {
		scheme = resolver.GetDefaultScheme()
	}
	if resolver.Get(scheme) == nil {
		return fmt.Errorf("lookup_service %q has scheme %q, for which no resolver is registered", target, scheme)
	}
	return nil
}

// Channel is a channel to one route lookup service: a rls.Lookuper.
type Channel struct {
	cc     *grpc.ClientConn
	cancel context.CancelFunc
	done   chan struct{} // closed when the state watcher has returned
}

// Dial makes the channel to target for a policy under the channel of
// bopts, and calls backToReady each time the channel becomes ready after
// a failure. It connects at once: a lookup is expected soon.
func Dial(target string, bopts balancer.BuildOptions, backToReady func()) (*Channel, error) {
	// The parent channel's authority, so that the lookup service is
	// authenticated as the same identity as the parent's servers.
	opts := []grpc.DialOption{grpc.WithAuthority(bopts.Authority)}
	if bopts.Dialer != nil {
		opts = append(opts, grpc.WithContextDialer(bopts.Dialer))
	}
	switch {
	case bopts.DialCreds != nil:
		opts = append(opts, grpc.WithTransportCredentials(bopts.DialCreds.Clone()))
	case bopts.CredsBundle != nil:
		// gRPC's bundles take "fallback" for a channel that is not to
		// the bundle's own backends.
		bundle, err := bopts.CredsBundle.NewWithMode("fallback")
		if err != nil {
			return nil, fmt.Errorf("rlsgrpc: credentials for %q: %w", target, err)
		}
		opts = append(opts, grpc.WithCredentialsBundle(bundle))
	default:
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("rlsgrpc: channel to %q: %w", target, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Channel{cc: cc, cancel: cancel, done: make(chan struct{})}
	cc.Connect()
	go c.watch(ctx, backToReady)
	return c, nil
}

// watch calls backToReady when the channel goes from TRANSIENT_FAILURE to
// READY, until ctx ends.
func (c *Channel) watch(ctx context.Context, backToReady func()) {
	defer close(c.done)
	failed := false
	for s := c.cc.GetState(); ; s = c.cc.GetState() {
		switch s {
		case connectivity.TransientFailure:
			failed = true
		case connectivity.Ready:
			if failed && backToReady != nil {
				backToReady()
			}
			failed = false
		}
		if !c.cc.WaitForStateChange(ctx, s) {
			return
		}
	}
}

// Lookup implements rls.Lookuper. A status the service answered with is
// an *rls.AnswerError; UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED
// and CANCELLED are the lookup not taken.
func (c *Channel) Lookup(ctx context.Context, req *rls.LookupRequest) (*rls.LookupResponse, error) {
	in := marshalRequest(req)
	var out []byte
	if err := c.cc.Invoke(ctx, lookupMethod, &in, &out, grpc.ForceCodecV2(rawCodec{})); err != nil {
		switch status.Code(err) {
		case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded, codes.Canceled:
			// Not taken: the throttle counts it so.
			return nil, err
		}
		return nil, &rls.AnswerError{Err: err}
	}
	return unmarshalResponse(out)
}

// Close implements rls.Lookuper: the channel is closed, and its state
// watcher has returned.
func (c *Channel) Close() {
	c.cancel()
	c.cc.Close()
	<-c.done
}
