// Package parity_test holds the same xDS resources up to goxds and to
// grpc-go's own xds resolver, both linked into this test binary, and
// asserts the same RPC outcomes. It is a package of its own because
// importing google.golang.org/grpc/xds registers grpc-go's "xds" scheme
// and its balancers for the whole binary; grpcxds's own tests register
// "xds" for goxds.
package parity_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// outcome is what one resolver's channel did with one case.
type outcome struct {
	code     codes.Code
	attempts int64 // seen at the server
	share    float64
}

// The same Listener, RouteConfiguration and Clusters give the same RPC
// outcomes through goxds and through grpc-go's own xds resolver: the
// status of a fault abort, the attempts a retry policy makes seen at the
// server, the deadline of a max_stream_duration, a weighted split within
// 5% of the configured one, and the route gRPC skips.
func TestParityWithGRPCGo(t *testing.T) {
	t.Parallel()
	p := newPair(t)
	// blocked300ms makes an RPC to a server that blocks, which a bound of
	// 300ms must end.
	blocked300ms := func(conn *grpc.ClientConn, ready, _ *backend) outcome {
		defer handle(ready, block)()
		start := time.Now()
		_, err := call(p.ctx, conn)
		if took := time.Since(start); took < 300*time.Millisecond || took > 10*time.Second {
			t.Errorf("RPC ended after %v; want about 300ms", took)
		}
		return outcome{code: status.Code(err)}
	}
	for i, tc := range []struct {
		name string
		// fault is the code of a case whose fault filter aborts every RPC.
		fault codes.Code
		// setup returns the resources for backend ready, which serves
		// them, and a second backend; run makes the case's RPCs on conn.
		setup func(ready, other *backend) testutils.Resources
		run   func(conn *grpc.ClientConn, ready, other *backend) outcome
		// split is the share of RPCs the route sends to ready, for a case
		// whose run measures one.
		split float64
	}{{
		name:  "retries: UNAVAILABLE twice, num_retries 3",
		setup: retrying("unavailable", 3),
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			return failing(p.ctx, conn, ready, 2, codes.Unavailable)
		},
	}, {
		name: "retries: always UNAVAILABLE, num_retries 10 on the virtual host",
		setup: func(ready, _ *backend) testutils.Resources {
			rc := vhost(toCluster("A"))
			rc.VirtualHosts[0].RetryPolicy = &routev3.RetryPolicy{RetryOn: "unavailable", NumRetries: wrapperspb.UInt32(10)}
			return tree(rc, nil, clusters("A"), eds("A", ready))
		},
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			return failing(p.ctx, conn, ready, 100, codes.Unavailable)
		},
	}, {
		name:  "retries: INTERNAL not in retry_on",
		setup: retrying("unavailable,cancelled", 3),
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			return failing(p.ctx, conn, ready, 100, codes.Internal)
		},
	}, {
		name:  "retries: UNAVAILABLE after response headers is not retried",
		setup: retrying("unavailable", 3),
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			h := func(ctx context.Context) error {
				if err := grpc.SendHeader(ctx, metadata.Pairs("x-answered", "yes")); err != nil {
					return err
				}
				return status.Error(codes.Unavailable, "failing after headers")
			}
			defer handle(ready, h)()
			_, err := call(p.ctx, conn)
			return outcome{code: status.Code(err), attempts: ready.rpcs.Load()}
		},
	}, {
		name:  "retries: a 300 KiB request is not retried",
		setup: retrying("unavailable", 3),
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			h := failFirst(1, codes.Unavailable)
			defer handle(ready, h)()
			err := conn.Invoke(p.ctx, sayHello, wrapperspb.String(strings.Repeat("x", 300<<10)), new(wrapperspb.StringValue))
			return outcome{code: status.Code(err), attempts: ready.rpcs.Load()}
		},
	}, {
		name:  "retries: a negative pushback ends them",
		setup: retrying("unavailable", 3),
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			h := func(ctx context.Context) error {
				grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", "-1"))
				return status.Error(codes.Unavailable, "do not retry")
			}
			defer handle(ready, h)()
			_, err := call(p.ctx, conn)
			return outcome{code: status.Code(err), attempts: ready.rpcs.Load()}
		},
	}, {
		name:  "retries: a stream failing twice, replayed",
		setup: retrying("unavailable", 3),
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			h := failFirst(2, codes.Unavailable)
			defer handle(ready, h)()
			got, err := chat(p.ctx, conn, 3)
			if err == nil && got != "3" {
				t.Errorf("stream answered %q; want 3: every message sent again", got)
			}
			return outcome{code: status.Code(err), attempts: ready.rpcs.Load()}
		},
	}, {
		name: "max_stream_duration 300ms on a server that blocks",
		setup: func(ready, _ *backend) testutils.Resources {
			r := toCluster("A")
			r.GetRoute().MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(300 * time.Millisecond)}
			return tree(vhost(r), nil, clusters("A"), eds("A", ready))
		},
		run: blocked300ms,
	}, {
		name: "grpc_timeout_header_max 300ms beats max_stream_duration 1h",
		setup: func(ready, _ *backend) testutils.Resources {
			r := toCluster("A")
			r.GetRoute().MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{
				MaxStreamDuration: durationpb.New(time.Hour), GrpcTimeoutHeaderMax: durationpb.New(300 * time.Millisecond),
			}
			return tree(vhost(r), nil, clusters("A"), eds("A", ready))
		},
		run: blocked300ms,
	}, {
		name: "the connection manager's max_stream_duration 300ms",
		setup: func(ready, _ *backend) testutils.Resources {
			l := testutils.Listener(listener, routeName)
			hcm := new(hcmv3.HttpConnectionManager)
			if err := l.ApiListener.ApiListener.UnmarshalTo(hcm); err != nil {
				t.Fatal(err)
			}
			hcm.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxStreamDuration: durationpb.New(300 * time.Millisecond)}
			l.ApiListener.ApiListener = testutils.MarshalAny(hcm)
			return tree(vhost(toCluster("A")), l, clusters("A"), eds("A", ready))
		},
		run: blocked300ms,
	}, {
		// gRPC does not use route.timeout: the application's deadline ends
		// the RPC.
		name: "route timeout 100ms, application deadline 1s",
		setup: func(ready, _ *backend) testutils.Resources {
			r := toCluster("A")
			r.GetRoute().Timeout = durationpb.New(100 * time.Millisecond)
			return tree(vhost(r), nil, clusters("A"), eds("A", ready))
		},
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			defer handle(ready, block)()
			ctx, cancel := context.WithTimeout(p.ctx, time.Second)
			defer cancel()
			start := time.Now()
			_, err := call(ctx, conn)
			if took := time.Since(start); took < time.Second {
				t.Errorf("RPC ended after %v; want the application's 1s", took)
			}
			return outcome{code: status.Code(err)}
		},
	}, {
		name:  "weighted 80/20",
		split: 0.8,
		setup: func(ready, other *backend) testutils.Resources {
			r := toCluster("A")
			r.GetRoute().ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
				Clusters: []*routev3.WeightedCluster_ClusterWeight{
					{Name: "A", Weight: wrapperspb.UInt32(80)}, {Name: "B", Weight: wrapperspb.UInt32(20)},
				},
			}}
			return tree(vhost(r), nil, clusters("A", "B"), eds("A", ready), eds("B", other))
		},
		run: func(conn *grpc.ClientConn, ready, other *backend) outcome {
			p.waitServedBy(conn, other.name)
			ready.rpcs.Store(0)
			other.rpcs.Store(0)
			const n = 1000
			for range n {
				if _, err := call(p.ctx, conn); err != nil {
					return outcome{code: status.Code(err)}
				}
			}
			return outcome{share: float64(ready.rpcs.Load()) / n}
		},
	}, {
		name: "a cluster_header route is skipped",
		setup: func(ready, other *backend) testutils.Resources {
			skipped := toCluster("B")
			skipped.GetRoute().ClusterSpecifier = &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"}
			return tree(vhost(skipped, toCluster("A")), nil, clusters("A", "B"), eds("A", ready), eds("B", other))
		},
	}, {
		name:  "fault abort 100% ABORTED",
		fault: codes.Aborted,
		setup: func(ready, _ *backend) testutils.Resources {
			return tree(vhost(toCluster("A")), withFault(t, &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
				ErrorType:  &faultv3.FaultAbort_GrpcStatus{GrpcStatus: uint32(codes.Aborted)},
				Percentage: &typev3.FractionalPercent{Numerator: 100},
			}}), clusters("A"), eds("A", ready))
		},
	}, {
		name:  "fault abort with status OK",
		fault: codes.Unknown, // a unary RPC sees io.EOF
		setup: func(ready, _ *backend) testutils.Resources {
			return tree(vhost(toCluster("A")), withFault(t, &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
				ErrorType:  &faultv3.FaultAbort_GrpcStatus{GrpcStatus: uint32(codes.OK)},
				Percentage: &typev3.FractionalPercent{Numerator: 100},
			}}), clusters("A"), eds("A", ready))
		},
	}, {
		name:  "fault abort HTTP 429",
		fault: codes.Unavailable,
		setup: func(ready, _ *backend) testutils.Resources {
			return tree(vhost(toCluster("A")), withFault(t, &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
				ErrorType:  &faultv3.FaultAbort_HttpStatus{HttpStatus: 429},
				Percentage: &typev3.FractionalPercent{Numerator: 100},
			}}), clusters("A"), eds("A", ready))
		},
	}} {
		// A deadline per case, not one for the whole test: under the race
		// detector on a loaded machine the cases together take longer
		// than testTimeout, each alone far less.
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		p.ctx = ctx
		// A backend per case and resolver: the first RPC it serves says the
		// case's configuration is in force on that channel.
		got := make(map[string]outcome)
		for _, name := range []string{"goxds", "grpc-go"} {
			conn := p.conns[name]
			ready, other := startBackend(t, fmt.Sprintf("%s-%d", name, i)), startBackend(t, fmt.Sprintf("%s-%d-other", name, i))
			p.update(isolate(t, tc.setup(ready, other), fmt.Sprintf("-%s-%d", name, i)))
			p.waitConfig(conn, ready, tc.fault)
			run := tc.run
			if run == nil {
				run = func(conn *grpc.ClientConn, ready, _ *backend) outcome {
					ready.rpcs.Store(0)
					_, err := call(p.ctx, conn)
					return outcome{code: status.Code(err), attempts: ready.rpcs.Load()}
				}
			}
			got[name] = run(conn, ready, other)
		}
		cancel()
		g, w := got["goxds"], got["grpc-go"]
		t.Logf("%s: goxds %+v, grpc-go %+v", tc.name, g, w)
		if g.code != w.code || g.attempts != w.attempts {
			t.Errorf("%s: goxds %+v, grpc-go %+v; want the same outcome", tc.name, g, w)
		}
		// Each channel's split is a random draw per RPC: over 1,000 RPCs
		// at 80/20 one standard deviation is 1.3%, so each share is held to
		// the configured one within 5% (four of them). Held to each other,
		// two draws differ by more than 5% about once in 300 runs.
		for name, o := range got {
			if o.share < tc.split-0.05 || o.share > tc.split+0.05 {
				t.Errorf("%s: %s sent %.3f of its RPCs to the first cluster; want %.2f within 5%%", tc.name, name, o.share, tc.split)
			}
		}
	}
}

// waitConfig waits until conn's channel has the configuration that names
// backend ready: an RPC reaches it, or for a case whose fault filter
// aborts every RPC, one fails with that code from the filter (the fault
// cases come last, each with a code of its own).
func (p *pair) waitConfig(conn *grpc.ClientConn, ready *backend, fault codes.Code) {
	p.t.Helper()
	for p.ctx.Err() == nil {
		name, err := call(p.ctx, conn)
		if fault == codes.OK && err == nil && name == ready.name {
			return
		}
		if fault != codes.OK && status.Code(err) == fault && (fault == codes.Unknown || strings.Contains(strings.ToLower(err.Error()), "fault")) {
			return
		}
	}
	p.t.Fatalf("configuration for %s never in force", ready.name)
}

// failing makes ready fail its next n RPCs with code, makes one RPC, and
// reports its status and the attempts ready saw.
func failing(ctx context.Context, conn *grpc.ClientConn, ready *backend, n int64, code codes.Code) outcome {
	defer handle(ready, failFirst(n, code))()
	_, err := call(ctx, conn)
	return outcome{code: status.Code(err), attempts: ready.rpcs.Load()}
}

// retrying is the setup of a case whose route to cluster A retries the
// codes of retryOn n times.
func retrying(retryOn string, n uint32) func(ready, _ *backend) testutils.Resources {
	return func(ready, _ *backend) testutils.Resources {
		r := toCluster("A")
		r.GetRoute().RetryPolicy = &routev3.RetryPolicy{RetryOn: retryOn, NumRetries: wrapperspb.UInt32(n)}
		return tree(vhost(r), nil, clusters("A"), eds("A", ready))
	}
}

// handle makes b run h first in every RPC and counts its RPCs from 0; the
// function it returns takes h away.
func handle(b *backend, h func(context.Context) error) (restore func()) {
	b.handler.Store(&h)
	b.rpcs.Store(0)
	return func() { b.handler.Store(nil) }
}

// failFirst fails the first n RPCs it sees with code, and lets the others
// through.
func failFirst(n int64, code codes.Code) func(context.Context) error {
	var seen atomic.Int64
	return func(context.Context) error {
		if seen.Add(1) > n {
			return nil
		}
		return status.Error(code, "failing as told")
	}
}

// block holds an RPC until it ends.
func block(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

// An RPC to a listener that does not exist fails with UNAVAILABLE through
// both, and once the does-not-exist timer (15s in both) has fired, the
// error names the node ID. (Before that, grpc-go fails RPCs that do not
// wait for ready with "produced zero addresses".) Wait-for-ready RPCs wait
// through both until their deadline, or until the listener exists: goxds
// then sends them by it; grpc-go v1.85 fails them with UNAVAILABLE
// "unknown cluster selected for RPC" (as seen here), the one difference.
func TestParityMissingListener(t *testing.T) {
	t.Parallel()
	p := newPair(t)
	p.update(testutils.Resources{})
	errs := make(map[string]chan error)
	for name, conn := range p.conns {
		ch := make(chan error, 1)
		errs[name] = ch
		go func() {
			// Polled, not spun: grpc-go's RPCs fail at once until then, and
			// the machine is shared.
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				_, err := call(p.ctx, conn)
				if status.Code(err) != codes.Unavailable || strings.Contains(err.Error(), name) || p.ctx.Err() != nil {
					ch <- err
					return
				}
				select {
				case <-tick.C:
				case <-p.ctx.Done():
				}
			}
		}()
	}
	for name, ch := range errs {
		if err := <-ch; status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: RPC to a missing listener: %v; want UNAVAILABLE naming node ID %q", name, err, name)
		}
	}
	for name, conn := range p.conns {
		short, cancel := context.WithTimeout(p.ctx, 100*time.Millisecond)
		err := conn.Invoke(short, sayHello, wrapperspb.String("hi"), new(wrapperspb.StringValue), grpc.WaitForReady(true))
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("%s: wait-for-ready RPC with a 100ms deadline to a missing listener: %v; want DEADLINE_EXCEEDED", name, err)
		}
	}
	a := startBackend(t, "a")
	for name, conn := range p.conns {
		ch := make(chan error, 1)
		errs[name] = ch
		go func() {
			err := conn.Invoke(p.ctx, sayHello, wrapperspb.String("hi"), new(wrapperspb.StringValue), grpc.WaitForReady(true))
			ch <- err
		}()
	}
	p.update(tree(vhost(toCluster("A")), nil, clusters("A"), eds("A", a)))
	for name, ch := range errs {
		err := <-ch
		switch {
		case name == "grpc-go" && status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "unknown cluster selected"):
		case err != nil:
			t.Errorf("%s: wait-for-ready RPC made while the listener was missing: %v; want it served once the listener exists", name, err)
		}
	}
}

// With grpc-go's resolver linked in, the scheme "xds" is its: Register
// refuses it, and says why.
func TestRegisterXDSTaken(t *testing.T) {
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = grpcxds.Register(grpcxds.Options{Scheme: "xds", Bootstrap: cfg})
	if err == nil || !strings.Contains(err.Error(), "grpc-go's own xDS resolver") {
		t.Errorf("Register(xds) with grpc-go's resolver linked: %v; want an error saying the scheme is taken", err)
	}
}
