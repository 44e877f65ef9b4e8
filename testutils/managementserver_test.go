package testutils

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func startManagementServer(t *testing.T, opts ManagementServerOptions) *ManagementServer {
	t.Helper()
	ms, err := StartManagementServer(opts)
	if err != nil {
		t.Fatalf("StartManagementServer: %v", err)
	}
	t.Cleanup(ms.Stop)
	return ms
}

func update(ctx context.Context, t *testing.T, ms *ManagementServer, nodeID string, res Resources) {
	t.Helper()
	if err := ms.Update(ctx, nodeID, res); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func wantResponse(t *testing.T, resp *discoveryv3.DiscoveryResponse, typeURL, version string, names ...string) {
	t.Helper()
	if resp.GetTypeUrl() != typeURL || resp.GetVersionInfo() != version {
		t.Fatalf("got a %s response at version %q, want %s at %q", resp.GetTypeUrl(), resp.GetVersionInfo(), typeURL, version)
	}
	if got := namesOf(t, resp); !slices.Equal(got, sorted(names)) {
		t.Fatalf("%s response holds %q, want %q", typeURL, got, sorted(names))
	}
}

// The reason the snapshot cache runs with ads=false: a client asking for
// some of the clusters must get them.
func TestManagementServerSotWSubset(t *testing.T) {
	ctx := testContext(t)
	ms := startManagementServer(t, ManagementServerOptions{})
	update(ctx, t, ms, "n1", DefaultResources(ResourceParams{ClusterNames: []string{"a", "b", "c"}}))

	s := openSotW(ctx, t, adsClient(t, ms.Address()))
	s.send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ClusterType, ResourceNames: []string{"a", "c"}})
	resp := s.recv()
	wantResponse(t, resp, resourcev3.ClusterType, "1", "a", "c")
	s.ack(resp, "a", "c")

	s.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{"b"}})
	wantResponse(t, s.recv(), resourcev3.EndpointType, "1", "b")
}

// The server serves wildcards as go-control-plane does: the legacy form
// (nothing named) everywhere; an explicit "*" in delta and from the linear
// cache, but the snapshot cache filters a SotW answer by the literal names
// (envoyproxy/go-control-plane#558), which is why clients send the wildcard
// alone in the legacy form.
func TestManagementServerWildcard(t *testing.T) {
	ctx := testContext(t)
	res := Resources{Listeners: []*listenerv3.Listener{Listener("l1", "r"), Listener("l2", "r")}}
	for _, linear := range []bool{false, true} {
		ms := startManagementServer(t, ManagementServerOptions{Linear: linear})
		update(ctx, t, ms, "n1", res)
		client := adsClient(t, ms.Address())
		sotw := []struct {
			names, want []string
		}{
			{nil, []string{"l1", "l2"}},
			{[]string{"*"}, []string{"l1", "l2"}},
			{[]string{"*", "l1"}, []string{"l1", "l2"}},
		}
		if !linear {
			sotw[1].want, sotw[2].want = nil, []string{"l1"}
		}
		for _, tt := range sotw {
			s := openSotW(ctx, t, client)
			s.send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ListenerType, ResourceNames: tt.names})
			resp := s.recv()
			if got := namesOf(t, resp); !slices.Equal(got, tt.want) {
				t.Errorf("linear=%v: SotW request for %q got %q, want %q", linear, tt.names, got, tt.want)
			}
		}
		for _, names := range [][]string{{"*"}, nil} {
			d := openDelta(ctx, t, client)
			d.send(&discoveryv3.DeltaDiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ListenerType, ResourceNamesSubscribe: names})
			if got := deltaNamesOf(d.recv()); !slices.Equal(got, []string{"l1", "l2"}) {
				t.Errorf("linear=%v: delta wildcard %q got %q, want [l1 l2]", linear, names, got)
			}
		}
	}
}

// Only the types an Update changes get a new version and a response.
func TestManagementServerUpdateChangedTypesOnly(t *testing.T) {
	ctx := testContext(t)
	ms := startManagementServer(t, ManagementServerOptions{})
	res := DefaultResources(ResourceParams{ClusterNames: []string{"a"}, Ports: []uint32{1}})
	update(ctx, t, ms, "n1", res)

	s := openSotW(ctx, t, adsClient(t, ms.Address()))
	s.send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ClusterType, ResourceNames: []string{"a"}})
	s.ack(s.recv(), "a")
	s.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{"a"}})
	s.ack(s.recv(), "a")

	update(ctx, t, ms, "n1", res) // unchanged: nothing is sent
	res.Endpoints = []*endpointv3.ClusterLoadAssignment{ClusterLoadAssignment("a", "127.0.0.1", 2)}
	update(ctx, t, ms, "n1", res) // update 3 changes EDS only
	resp := s.recv()
	wantResponse(t, resp, resourcev3.EndpointType, "3", "a")
	s.ack(resp, "a")

	res.Clusters = []*clusterv3.Cluster{Cluster("a", "other")}
	update(ctx, t, ms, "n1", res)
	// Had CDS been resent by update 2 or 3, it would come first.
	resp = s.recv()
	wantResponse(t, resp, resourcev3.ClusterType, "4", "a")
	s.ack(resp, "a")

	res.Clusters = nil
	update(ctx, t, ms, "n1", res)
	wantResponse(t, s.recv(), resourcev3.ClusterType, "5") // all deleted
}

// The server is go-control-plane's as it is: a NACK carries the last
// accepted version (here none), which differs from the cache's, so the
// rejected resources come back at once (envoyproxy/go-control-plane#962).
// Clients must pace their NACKs themselves.
func TestManagementServerNACKResendsAtOnce(t *testing.T) {
	for _, linear := range []bool{false, true} {
		t.Run(map[bool]string{false: "snapshot", true: "linear"}[linear], func(t *testing.T) {
			ctx := testContext(t)
			ms := startManagementServer(t, ManagementServerOptions{Linear: linear})
			res := DefaultResources(ResourceParams{ClusterNames: []string{"a"}})
			update(ctx, t, ms, "n1", res)

			s := openSotW(ctx, t, adsClient(t, ms.Address()))
			s.send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ClusterType, ResourceNames: []string{"a"}})
			first := s.recv()
			s.send(&discoveryv3.DiscoveryRequest{
				TypeUrl:       resourcev3.ClusterType,
				ResourceNames: []string{"a"},
				ResponseNonce: first.GetNonce(),
				ErrorDetail:   status.New(codes.InvalidArgument, "rejected").Proto(),
			})
			again := s.recv()
			if again.GetTypeUrl() != resourcev3.ClusterType || again.GetVersionInfo() != first.GetVersionInfo() ||
				again.GetNonce() == first.GetNonce() || len(again.GetResources()) != 1 ||
				!proto.Equal(again.GetResources()[0], first.GetResources()[0]) {
				t.Fatalf("after the NACK got %v, want the rejected cluster again, same version, new nonce", again)
			}
			if got := ms.Counters().NACKs; got != 1 {
				t.Errorf("Counters().NACKs = %d, want 1", got)
			}
		})
	}
}

// go-control-plane ignores a SotW request with a stale nonce, subscription
// change and all; clients must always send the latest nonce.
func TestManagementServerIgnoresStaleNonce(t *testing.T) {
	ctx := testContext(t)
	ms := startManagementServer(t, ManagementServerOptions{})
	update(ctx, t, ms, "n1", DefaultResources(ResourceParams{ClusterNames: []string{"a", "b", "c"}}))

	s := openSotW(ctx, t, adsClient(t, ms.Address()))
	s.send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ClusterType, ResourceNames: []string{"a"}})
	resp := s.recv()
	s.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, VersionInfo: "1", ResponseNonce: "stale", ResourceNames: []string{"a", "b"}})
	s.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, VersionInfo: "1", ResponseNonce: resp.GetNonce(), ResourceNames: []string{"a", "c"}})
	// Had the stale request counted, [a b] would arrive first.
	wantResponse(t, s.recv(), resourcev3.ClusterType, "1", "a", "c")
}

func TestManagementServerDelta(t *testing.T) {
	ctx := testContext(t)
	ms := startManagementServer(t, ManagementServerOptions{})
	res := DefaultResources(ResourceParams{ClusterNames: []string{"a", "b"}})
	update(ctx, t, ms, "n1", res)
	client := adsClient(t, ms.Address())

	d := openDelta(ctx, t, client)
	// A name the server lacks gets no answer at all: had the first request
	// been answered, that answer would come before the one checked here.
	d.send(&discoveryv3.DeltaDiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ClusterType, ResourceNamesSubscribe: []string{"missing"}})
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResourceNamesSubscribe: []string{"a"}})
	resp := d.recv()
	if got := deltaNamesOf(resp); !slices.Equal(got, []string{"a"}) || len(resp.GetRemovedResources()) != 0 {
		t.Fatalf("got resources %q, removed %q; want [a] and nothing removed", got, resp.GetRemovedResources())
	}
	versionA := resp.GetResources()[0].GetVersion()
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: resp.GetNonce()})
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResourceNamesSubscribe: []string{"b"}})
	resp = d.recv()
	if got := deltaNamesOf(resp); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after subscribing to b got %q, want [b]", got)
	}
	versionB := resp.GetResources()[0].GetVersion()
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: resp.GetNonce()})

	res.Clusters = res.Clusters[1:] // delete a
	update(ctx, t, ms, "n1", res)
	resp = d.recv()
	if len(resp.GetResources()) != 0 || !slices.Equal(resp.GetRemovedResources(), []string{"a"}) {
		t.Fatalf("after deleting a got resources %q, removed %q; want none and [a]", deltaNamesOf(resp), resp.GetRemovedResources())
	}

	// A new stream that holds a and b at their versions is sent a, which
	// changed, and not b.
	res.Clusters = append(res.Clusters, Cluster("a", ""))
	update(ctx, t, ms, "n1", res)
	d2 := openDelta(ctx, t, client)
	d2.send(&discoveryv3.DeltaDiscoveryRequest{
		Node:                    node("n1"),
		TypeUrl:                 resourcev3.ClusterType,
		ResourceNamesSubscribe:  []string{"a", "b"},
		InitialResourceVersions: map[string]string{"a": versionA, "b": versionB},
	})
	if got := deltaNamesOf(d2.recv()); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("with initial_resource_versions got %q, want [a] only", got)
	}
}

func TestManagementServerTTLAndHeartbeats(t *testing.T) {
	ctx := testContext(t)
	ms := startManagementServer(t, ManagementServerOptions{HeartbeatInterval: 10 * time.Millisecond})
	res := DefaultResources(ResourceParams{ClusterNames: []string{"a", "b"}})
	res.TTLs = map[ResourceKey]time.Duration{{TypeURL: resourcev3.ClusterType, Name: "a"}: 5 * time.Second}
	update(ctx, t, ms, "n1", res)

	s := openSotW(ctx, t, adsClient(t, ms.Address()))
	s.send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ClusterType, ResourceNames: []string{"a", "b"}})
	resp := s.recv()
	wantResponse(t, resp, resourcev3.ClusterType, "1", "a", "b")
	wrapped := wrappedResources(t, resp)
	if w := wrapped["a"]; w == nil || w.GetTtl().AsDuration() != 5*time.Second || w.GetResource() == nil {
		t.Fatalf("cluster a arrived as %v, want wrapped with a 5s ttl and a body", w)
	}
	if wrapped["b"] != nil {
		t.Fatalf("cluster b, which has no TTL, arrived wrapped: %v", wrapped["b"])
	}
	s.ack(resp, "a", "b")

	// The heartbeat holds only the resources with a TTL, without their body,
	// at the same version: a client must not read it as the full state.
	hb := s.recv()
	wantResponse(t, hb, resourcev3.ClusterType, "1", "a")
	if w := wrappedResources(t, hb)["a"]; w.GetResource() != nil || w.GetTtl().AsDuration() != 5*time.Second {
		t.Fatalf("heartbeat carries %v, want a 5s ttl and no body", w)
	}
}

func TestManagementServerLinear(t *testing.T) {
	ctx := testContext(t)
	ms := startManagementServer(t, ManagementServerOptions{Linear: true})
	res := DefaultResources(ResourceParams{ClusterNames: []string{"a", "b"}, Ports: []uint32{1}})
	update(ctx, t, ms, "n1", res)
	client := adsClient(t, ms.Address())

	s := openSotW(ctx, t, client)
	s.send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.EndpointType, ResourceNames: []string{"a", "b"}})
	resp := s.recv()
	if got := namesOf(t, resp); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("got %q, want [a b]", got)
	}
	s.ack(resp, "a", "b")
	d := openDelta(ctx, t, client)
	d.send(&discoveryv3.DeltaDiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{"*"}})
	dresp := d.recv()
	if got := deltaNamesOf(dresp); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("delta got %q, want [a b]", got)
	}
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResponseNonce: dresp.GetNonce()})

	res.Endpoints[1] = ClusterLoadAssignment("b", "127.0.0.1", 2)
	update(ctx, t, ms, "n1", res)
	// Only b changed, and a SotW EDS response from the linear cache holds
	// only b.
	if got := namesOf(t, s.recv()); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after changing b, SotW got %q, want [b]", got)
	}
	if got := deltaNamesOf(d.recv()); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after changing b, delta got %q, want [b]", got)
	}

	res.TTLs = map[ResourceKey]time.Duration{{TypeURL: resourcev3.EndpointType, Name: "a"}: time.Second}
	if err := ms.Update(ctx, "n1", res); err == nil {
		t.Error("Update with a TTL in Linear mode succeeded, want an error")
	}
	if _, err := StartManagementServer(ManagementServerOptions{Linear: true, HeartbeatInterval: time.Second}); err == nil {
		t.Error("StartManagementServer with Linear and HeartbeatInterval succeeded, want an error")
	}
}

// A type of the test's own is served under its type URL, whatever the
// message.
func TestManagementServerOtherTypes(t *testing.T) {
	const typeURL = "type.googleapis.com/goxds.test.Thing"
	ctx := testContext(t)
	ms := startManagementServer(t, ManagementServerOptions{})
	thing := &corev3.TypedExtensionConfig{Name: "thing-1", TypedConfig: MarshalAny(&corev3.Node{Id: "x"})}
	update(ctx, t, ms, "n1", Resources{Others: map[string][]proto.Message{typeURL: {thing}}})

	for _, delta := range []bool{false, true} {
		var got []byte
		if delta {
			d := openDelta(ctx, t, adsClient(t, ms.Address()))
			d.send(&discoveryv3.DeltaDiscoveryRequest{Node: node("n1"), TypeUrl: typeURL, ResourceNamesSubscribe: []string{"thing-1"}})
			r := d.recv().GetResources()[0]
			if r.GetName() != "thing-1" || r.GetResource().GetTypeUrl() != typeURL {
				t.Fatalf("delta resource %q of type %q, want thing-1 of %s", r.GetName(), r.GetResource().GetTypeUrl(), typeURL)
			}
			got = r.GetResource().GetValue()
		} else {
			s := openSotW(ctx, t, adsClient(t, ms.Address()))
			s.send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: typeURL, ResourceNames: []string{"thing-1"}})
			resp := s.recv()
			if len(resp.GetResources()) != 1 || resp.GetResources()[0].GetTypeUrl() != typeURL {
				t.Fatalf("SotW response %v, want one resource of %s", resp, typeURL)
			}
			got = resp.GetResources()[0].GetValue()
		}
		decoded := &corev3.TypedExtensionConfig{}
		if err := proto.Unmarshal(got, decoded); err != nil || !proto.Equal(decoded, thing) {
			t.Fatalf("served %v (%v), want %v", decoded, err, thing)
		}
	}
}

func TestManagementServerUpdateErrors(t *testing.T) {
	ctx := testContext(t)
	ms := startManagementServer(t, ManagementServerOptions{})
	for name, res := range map[string]Resources{
		"unnamed":   {Clusters: []*clusterv3.Cluster{{}}},
		"nil":       {Clusters: []*clusterv3.Cluster{nil}},
		"duplicate": {Clusters: []*clusterv3.Cluster{Cluster("a", ""), Cluster("a", "x")}},
		"stray TTL": {TTLs: map[ResourceKey]time.Duration{{TypeURL: resourcev3.ClusterType, Name: "a"}: time.Second}},
	} {
		if err := ms.Update(ctx, "n1", res); err == nil {
			t.Errorf("Update(%s) succeeded, want an error", name)
		}
	}
}

func TestManagementServerHooksAndCounters(t *testing.T) {
	ctx := testContext(t)
	var mu sync.Mutex
	var events []string
	record := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	closed := make(chan struct{}, 2)
	ms := startManagementServer(t, ManagementServerOptions{
		OnStreamOpen: func(_ int64, delta bool) error {
			if delta {
				return status.Error(codes.PermissionDenied, "no delta today")
			}
			record("open")
			return nil
		},
		OnStreamClosed: func(int64, bool) { closed <- struct{}{} },
		OnStreamRequest: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
			record("request " + req.GetTypeUrl())
			return nil
		},
		OnStreamResponse: func(_ int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
			record("response " + resp.GetVersionInfo())
		},
	})
	update(ctx, t, ms, "n1", DefaultResources(ResourceParams{}))
	client := adsClient(t, ms.Address())

	s := openSotW(ctx, t, client)
	s.send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ListenerType, ResourceNames: []string{"listener"}})
	s.ack(s.recv(), "listener")
	if err := s.st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.st.Recv(); err == nil {
		t.Fatal("Recv after CloseSend returned a response, want the end of the stream")
	}

	d := openDelta(ctx, t, client)
	if _, err := d.st.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("delta stream ended with %v, want the hook's PermissionDenied", err)
	}
	for range 2 {
		select {
		case <-closed:
		case <-ctx.Done():
			t.Fatal("timed out waiting for OnStreamClosed")
		}
	}

	mu.Lock()
	want := []string{"open", "request " + resourcev3.ListenerType, "response 1", "request " + resourcev3.ListenerType}
	if !slices.Equal(events, want) {
		t.Errorf("hooks saw %q, want %q", events, want)
	}
	mu.Unlock()
	wantCounters := Counters{Streams: 1, DeltaStreams: 1, Requests: 2, Responses: 1}
	if got := ms.Counters(); got != wantCounters {
		t.Errorf("Counters() = %+v, want %+v", got, wantCounters)
	}
}

// The per-type services are registered too.
func TestManagementServerPerTypeService(t *testing.T) {
	ctx := testContext(t)
	ms := startManagementServer(t, ManagementServerOptions{})
	update(ctx, t, ms, "n1", DefaultResources(ResourceParams{ClusterNames: []string{"a"}}))
	cc, err := grpc.NewClient(ms.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	st, err := clusterservice.NewClusterDiscoveryServiceClient(cc).StreamClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node("n1"), ResourceNames: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	wantResponse(t, resp, resourcev3.ClusterType, "1", "a")
}

// Stop leaves no goroutine behind, even with streams open, and a new server
// can take over the address at once.
func TestManagementServerStopAndRestart(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := testContext(t)
	ms, err := StartManagementServer(ManagementServerOptions{HeartbeatInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	update(ctx, t, ms, "n1", DefaultResources(ResourceParams{}))
	cc, err := grpc.NewClient(ms.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
	s := openSotW(ctx, t, client)
	s.send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ListenerType, ResourceNames: []string{"listener"}})
	s.recv()
	d := openDelta(ctx, t, client)
	d.send(&discoveryv3.DeltaDiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ListenerType})
	d.recv()

	ms.Stop()
	ms.Stop() // idempotent
	if _, err := s.st.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("SotW stream ended with %v, want Unavailable", err)
	}
	if _, err := d.st.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("delta stream ended with %v, want Unavailable", err)
	}

	ms2, err := StartManagementServer(ManagementServerOptions{Address: ms.Address()})
	if err != nil {
		t.Fatalf("restarting on %s: %v", ms.Address(), err)
	}
	defer ms2.Stop()
	update(ctx, t, ms2, "n1", DefaultResources(ResourceParams{}))
	st, err := client.StreamAggregatedResources(ctx, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ListenerType, ResourceNames: []string{"listener"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("Recv from the restarted server: %v", err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
}

// A server started with Initial serves it from its first stream: a client of
// an earlier server at the same address, holding version "1" of resources
// that have since changed, gets the new ones at the same version "1" (a
// new stream has been sent nothing), in every cache.
func TestManagementServerInitial(t *testing.T) {
	for _, opts := range []ManagementServerOptions{{}, {ADS: true}, {Linear: true}} {
		ctx := testContext(t)
		opts.Initial = map[string]Resources{"n1": DefaultResources(ResourceParams{ClusterNames: []string{"a"}})}
		ms := startManagementServer(t, opts)
		s := openSotW(ctx, t, adsClient(t, ms.Address()))
		s.send(&discoveryv3.DiscoveryRequest{Node: node("n1"), TypeUrl: resourcev3.ClusterType, VersionInfo: "1", ResourceNames: []string{"a"}})
		wantResponse(t, s.recv(), resourcev3.ClusterType, "1", "a")
	}
}
