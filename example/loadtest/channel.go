package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/grpcxds"
)

// Environment of a child in a channel run.
const (
	// envChannel names the backends' behaviour; set, the child runs a
	// gRPC channel instead of the bare xDS client or resolver.
	envChannel = "LOADTEST_CHANNEL"
	// envFiles is the open-file limit the child needs.
	envFiles = "LOADTEST_FILES"
	// envFirstRPC, set, makes goxds's channel connect a cluster on its
	// first RPC (grpcxds.Options.ConnectOnFirstRPC).
	envFirstRPC = "LOADTEST_FIRST_RPC"
)

// channelClient is a gRPC channel under test: goxds's (grpcxds) or
// grpc-go's own (xds:///). Both are grpc.ClientConns to the same listener,
// with the same credentials and no other options, so that what differs is
// the resolver and the balancer.
type channelClient struct {
	conn   *grpc.ClientConn
	probes atomic.Int64 // RPCs made
	files  uint64       // the open-file limit in force
}

// runGoxdsChannel makes a goxds channel to listener: grpcxds.NewClient,
// resolver and balancer from the bootstrap in the environment.
func runGoxdsChannel(listener string, files uint64, firstRPC bool) (info func() string, probe func(string, bool) string, stop func(), err error) {
	b, err := grpcxds.NewBuilder(grpcxds.Options{ConnectOnFirstRPC: firstRPC})
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := grpcxds.NewClient(grpcxds.DefaultScheme+":///"+listener, b, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Close()
		return nil, nil, nil, err
	}
	info, probe, stop, err = startChannel(conn, files)
	if err != nil {
		b.Close()
		return nil, nil, nil, err
	}
	return info, probe, func() {
		stop()
		b.Close()
	}, nil
}

// runGRPCChannel makes a grpc-go channel to listener through grpc-go's own
// xds resolver and balancers.
func runGRPCChannel(listener string, files uint64) (info func() string, probe func(string, bool) string, stop func(), err error) {
	conn, err := grpc.NewClient("xds:///"+listener, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, nil, err
	}
	return startChannel(conn, files)
}

func startChannel(conn *grpc.ClientConn, files uint64) (info func() string, probe func(string, bool) string, stop func(), err error) {
	c := &channelClient{conn: conn, files: files}
	// A channel from grpc.NewClient stays idle until its first RPC: the
	// resolver (and with it the xDS client) starts now, as in a service
	// that calls at once.
	conn.Connect()
	info = func() string {
		return fmt.Sprintf("channel=%s probes=%d open_files_limit=%d", conn.GetState(), c.probes.Load(), c.files)
	}
	return info, c.probe, func() { conn.Close() }, nil
}

// probe makes one wait-for-ready RPC to the route of cluster i (its
// "/svc-i/" prefix) and returns "ok <address that served it> <latency>",
// or "error <message>". Without wait, it starts the RPC and returns "ok"
// at once: the RPC picks the cluster, which a channel connecting on first
// RPC then connects, and ends by its deadline if no endpoint answers.
func (c *channelClient) probe(arg string, wait bool) string {
	i, err := strconv.Atoi(arg)
	if err != nil {
		return "error bad cluster index " + strconv.Quote(arg)
	}
	c.probes.Add(1)
	call := func(opts ...grpc.CallOption) (servedAt string, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var at wrapperspb.StringValue
		err = c.conn.Invoke(ctx, "/svc-"+strconv.Itoa(i)+"/Probe", &emptypb.Empty{}, &at, opts...)
		return at.GetValue(), err
	}
	if !wait {
		go call()
		return "ok"
	}
	start := time.Now()
	at, err := call(grpc.WaitForReady(true))
	if err != nil {
		return "error " + err.Error()
	}
	return fmt.Sprintf("ok %s %d", at, time.Since(start).Nanoseconds())
}
