package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// implBare is the calibration client: it subscribes down the tree
// (listener → route configuration → clusters → endpoints), unmarshals every
// resource into its typed message, keeps the decoded messages, and ACKs.
// No validation, no cache bookkeeping, no watchers, no timers: what the
// server and the protobuf runtime allow, the least a client keeping the
// configuration can cost.
const implBare = "bare"

// Environment the parent gives every child; the bare client reads it
// instead of a bootstrap.
const (
	envServer   = "LOADTEST_SERVER"
	envProtocol = "LOADTEST_PROTOCOL"
)

const (
	typeListener = "type.googleapis.com/envoy.config.listener.v3.Listener"
	typeRoute    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	typeCluster  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	typeEndpoint = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

// bareClient holds the decoded configuration, by type and name.
type bareClient struct {
	node      *corev3.Node
	mu        sync.Mutex
	resources map[string]map[string]proto.Message
	subs      map[string][]string // the names subscribed to, by type
	responses atomic.Int64
}

// runBare starts the bare client on the server and protocol in the
// environment.
func runBare(listener string) (info func() string, stop func(), err error) {
	addr, protocol := os.Getenv(envServer), os.Getenv(envProtocol)
	if addr == "" {
		return nil, nil, fmt.Errorf("%s is not set", envServer)
	}
	// Responses at 100,000 clusters are well above gRPC's default 4 MiB
	// limit; goxds allows 256 MiB, and so does this client.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	b := &bareClient{
		node:      &corev3.Node{Id: nodeID},
		resources: make(map[string]map[string]proto.Message),
		subs:      make(map[string][]string),
	}
	b.subs[typeListener] = []string{listener}
	go func() {
		// A broken stream (the harness restarts the server) is opened
		// again after a pause, with every subscription; a resource that
		// fails to decode ends the process, and the parent sees the exit.
		for ctx.Err() == nil {
			var err error
			if protocol == protoDelta {
				err = b.delta(ctx, ads)
			} else {
				err = b.sotw(ctx, ads)
			}
			if errors.Is(err, errDecode) {
				fmt.Fprintln(os.Stderr, "bare client:", err)
				os.Exit(1)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	info = func() string { return fmt.Sprintf("responses=%d", b.responses.Load()) }
	return info, func() { cancel(); conn.Close() }, nil
}

// errDecode marks a resource the bare client could not decode.
var errDecode = errors.New("decoding a resource")

// decode unmarshals one resource and keeps it; it returns the names of the
// resources of the next type down the tree that it refers to.
func (b *bareClient) decode(a *anypb.Any) (name string, next []string, err error) {
	m, name, next, err := decodeTyped(a)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", errDecode, err)
	}
	b.mu.Lock()
	byName := b.resources[a.GetTypeUrl()]
	if byName == nil {
		byName = make(map[string]proto.Message)
		b.resources[a.GetTypeUrl()] = byName
	}
	byName[name] = m
	b.mu.Unlock()
	return name, next, nil
}

// decodeTyped unmarshals one resource into its typed message.
func decodeTyped(a *anypb.Any) (m proto.Message, name string, next []string, err error) {
	switch a.GetTypeUrl() {
	case typeListener:
		l := new(listenerv3.Listener)
		if err := a.UnmarshalTo(l); err != nil {
			return nil, "", nil, err
		}
		hcm := new(hcmv3.HttpConnectionManager)
		if err := l.GetApiListener().GetApiListener().UnmarshalTo(hcm); err != nil {
			return nil, "", nil, err
		}
		m, name = l, l.GetName()
		next = []string{hcm.GetRds().GetRouteConfigName()}
	case typeRoute:
		rc := new(routev3.RouteConfiguration)
		if err := a.UnmarshalTo(rc); err != nil {
			return nil, "", nil, err
		}
		m, name = rc, rc.GetName()
		seen := make(map[string]bool)
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				if c := r.GetRoute().GetCluster(); c != "" && !seen[c] {
					seen[c] = true
					next = append(next, c)
				}
			}
		}
	case typeCluster:
		c := new(clusterv3.Cluster)
		if err := a.UnmarshalTo(c); err != nil {
			return nil, "", nil, err
		}
		m, name = c, c.GetName()
		svc := c.GetEdsClusterConfig().GetServiceName()
		if svc == "" {
			svc = name
		}
		next = []string{svc}
	case typeEndpoint:
		e := new(endpointv3.ClusterLoadAssignment)
		if err := a.UnmarshalTo(e); err != nil {
			return nil, "", nil, err
		}
		m, name = e, e.GetClusterName()
	default:
		return nil, "", nil, fmt.Errorf("unexpected type %q", a.GetTypeUrl())
	}
	return m, name, next, nil
}

// nextType is the type of the resources a type refers to.
func nextType(typeURL string) string {
	switch typeURL {
	case typeListener:
		return typeRoute
	case typeRoute:
		return typeCluster
	case typeCluster:
		return typeEndpoint
	}
	return ""
}

// newNames returns the names of want not in have, and want merged into
// have.
func newNames(have, want []string) (added, merged []string) {
	in := make(map[string]bool, len(have))
	for _, n := range have {
		in[n] = true
	}
	merged = have
	for _, n := range want {
		if !in[n] {
			in[n] = true
			added = append(added, n)
			merged = append(merged, n)
		}
	}
	return added, merged
}

// sotw runs the state-of-the-world stream: each response is decoded in full
// and ACKed; names found below are subscribed to on the next type.
func (b *bareClient) sotw(ctx context.Context, ads discoveryv3.AggregatedDiscoveryServiceClient) error {
	st, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	versions := make(map[string]string)
	for _, t := range []string{typeListener, typeRoute, typeCluster, typeEndpoint} {
		if names := b.subs[t]; len(names) > 0 {
			if err := st.Send(&discoveryv3.DiscoveryRequest{Node: b.node, TypeUrl: t, ResourceNames: names}); err != nil {
				return err
			}
		}
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		b.responses.Add(1)
		var refs []string
		for _, a := range resp.GetResources() {
			_, next, err := b.decode(a)
			if err != nil {
				return err
			}
			refs = append(refs, next...)
		}
		t := resp.GetTypeUrl()
		versions[t] = resp.GetVersionInfo()
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: b.node, TypeUrl: t, ResourceNames: b.subs[t],
			VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}); err != nil {
			return err
		}
		nt := nextType(t)
		if nt == "" {
			continue
		}
		added, merged := newNames(b.subs[nt], refs)
		if len(added) == 0 {
			continue
		}
		b.subs[nt] = merged
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: b.node, TypeUrl: nt, ResourceNames: merged,
			VersionInfo: versions[nt]}); err != nil {
			return err
		}
	}
}

// delta runs the incremental stream: each response is decoded and ACKed;
// names found below are subscribed to on the next type.
func (b *bareClient) delta(ctx context.Context, ads discoveryv3.AggregatedDiscoveryServiceClient) error {
	st, err := ads.DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	for _, t := range []string{typeListener, typeRoute, typeCluster, typeEndpoint} {
		if names := b.subs[t]; len(names) > 0 {
			if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: b.node, TypeUrl: t, ResourceNamesSubscribe: names}); err != nil {
				return err
			}
		}
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		b.responses.Add(1)
		var refs []string
		for _, r := range resp.GetResources() {
			_, next, err := b.decode(r.GetResource())
			if err != nil {
				return err
			}
			refs = append(refs, next...)
		}
		t := resp.GetTypeUrl()
		if len(resp.GetRemovedResources()) > 0 {
			b.mu.Lock()
			for _, n := range resp.GetRemovedResources() {
				delete(b.resources[t], n)
			}
			b.mu.Unlock()
		}
		if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: b.node, TypeUrl: t, ResponseNonce: resp.GetNonce()}); err != nil {
			return err
		}
		nt := nextType(t)
		if nt == "" {
			continue
		}
		added, merged := newNames(b.subs[nt], refs)
		if len(added) == 0 {
			continue
		}
		b.subs[nt] = merged
		if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: b.node, TypeUrl: nt, ResourceNamesSubscribe: added}); err != nil {
			return err
		}
	}
}
