package csds_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"go.uber.org/goleak"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/admin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/client/csds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCSDSReportsEveryState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Stop()
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: fs.Address(), NodeID: "csds-node"}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	events := make(chan string, 10)
	for _, name := range []string{"good", "bad", "missing"} {
		client.WatchListener(c, name, client.WatcherFuncs[*resources.Listener]{
			OnUpdate:        func(*resources.Listener) { events <- name },
			OnResourceError: func(error) { events <- name },
		})
	}
	for names := 0; names < 3; {
		req, err := fs.NextRequest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		names = len(req.ResourceNames)
	}
	bad := testutils.Listener("bad", "")
	if err := fs.Send(testutils.SotWResponse(resources.ListenerTypeURL, "v1", "n1", testutils.Listener("good", "route"), bad)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-events:
		case <-ctx.Done():
			t.Fatal("watchers not told")
		}
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	if err := csds.Register(s, c); err != nil {
		t.Fatal(err)
	}
	// A second registration is an error, where grpc would end the process.
	if err := csds.Register(s, c); !errors.Is(err, csds.ErrAlreadyRegistered) {
		t.Errorf("second Register: %v, want ErrAlreadyRegistered", err)
	}
	go s.Serve(lis)
	defer s.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := statusv3.NewClientStatusDiscoveryServiceClient(cc).FetchClientStatus(ctx, &statusv3.ClientStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Config) != 1 || resp.Config[0].GetNode().GetId() != "csds-node" {
		t.Fatalf("configs %v, want one for node csds-node", resp.Config)
	}
	got := map[string]*statusv3.ClientConfig_GenericXdsConfig{}
	for _, g := range resp.Config[0].GenericXdsConfigs {
		got[g.Name] = g
	}
	if g := got["good"]; g.GetClientStatus() != adminv3.ClientResourceStatus_ACKED || g.GetVersionInfo() != "v1" || g.GetXdsConfig() == nil || g.GetLastUpdated() == nil {
		t.Errorf("good: %v, want ACKED v1 with its config", g)
	}
	if g := got["bad"]; g.GetClientStatus() != adminv3.ClientResourceStatus_NACKED || g.GetErrorState().GetDetails() == "" ||
		g.GetErrorState().GetVersionInfo() != "v1" || g.GetErrorState().GetFailedConfiguration() == nil || g.GetXdsConfig() != nil {
		t.Errorf("bad: %v, want NACKED with error state and the rejected config", g)
	}
	if g := got["missing"]; g.GetClientStatus() != adminv3.ClientResourceStatus_REQUESTED {
		t.Errorf("missing: %v, want REQUESTED", g)
	}

	// The streaming method answers each request; contents can be left out.
	stream, err := statusv3.NewClientStatusDiscoveryServiceClient(cc).StreamClientStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&statusv3.ClientStatusRequest{ExcludeResourceContents: true}); err != nil {
		t.Fatal(err)
	}
	sresp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range sresp.Config[0].GenericXdsConfigs {
		if g.XdsConfig != nil || g.GetErrorState().GetFailedConfiguration() != nil {
			t.Errorf("%s carries contents despite exclude_resource_contents", g.Name)
		}
	}
	stream.CloseSend()
	if _, err := stream.Recv(); err == nil {
		t.Error("stream not closed after CloseSend")
	}
}

// Errors the server reports (gRFC A88) show as RECEIVED_ERROR with the
// server's error in error_state, data held or not; a timeout of a server
// marked resource_timer_is_transient_failure as TIMEOUT with its error.
func TestCSDSReportsServerErrorsAndTimeouts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Stop()
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: fs.Address(), NodeID: "csds-node",
		ServerFeatures: []string{bootstrap.FeatureResourceTimerIsTransientFailure}}))
	if err != nil {
		t.Fatal(err)
	}
	clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
	c, err := client.New(cfg, client.Options{Clock: clk, WatchExpiry: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	events := make(chan string, 10)
	for _, name := range []string{"held", "denied", "slow"} {
		client.WatchListener(c, name, client.WatcherFuncs[*resources.Listener]{
			OnUpdate:        func(*resources.Listener) { events <- name + ":update" },
			OnResourceError: func(error) { events <- name + ":resource-error" },
			OnAmbientError:  func(error) { events <- name + ":ambient-error" },
		})
	}
	// The names sent together share one clock timer: one per request that
	// named something new.
	seen, batches := map[string]bool{}, 0
	for len(seen) < 3 {
		req, err := fs.NextRequest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fresh := false
		for _, n := range req.ResourceNames {
			if !seen[n] {
				seen[n], fresh = true, true
			}
		}
		if fresh {
			batches++
		}
	}
	// Each name's timer, 2 s with the feature: "slow" times out.
	if err := clk.WaitForTimers(ctx, batches); err != nil {
		t.Fatal(err)
	}
	held := testutils.Listener("held", "route")
	resp := testutils.SotWResponse(resources.ListenerTypeURL, "v1", "n1", held)
	resp.ResourceErrors = []*discoveryv3.ResourceError{{
		ResourceName: &discoveryv3.ResourceName{Name: "denied"},
		ErrorDetail:  &statuspb.Status{Code: int32(codes.PermissionDenied), Message: "not for you"},
	}}
	if err := fs.Send(resp); err != nil {
		t.Fatal(err)
	}
	want := func(evs ...string) {
		t.Helper()
		for _, ev := range evs {
			select {
			case got := <-events:
				if got != ev {
					t.Fatalf("watcher event %s, want %s", got, ev)
				}
			case <-ctx.Done():
				t.Fatalf("no watcher event, want %s", ev)
			}
		}
	}
	want("held:update", "denied:resource-error")
	// "held" named only in resource_errors: not deleted as absent.
	resp = testutils.SotWResponse(resources.ListenerTypeURL, "v2", "n2")
	resp.ResourceErrors = []*discoveryv3.ResourceError{{
		ResourceName: &discoveryv3.ResourceName{Name: "held"},
		ErrorDetail:  &statuspb.Status{Code: int32(codes.NotFound), Message: "going away"},
	}}
	if err := fs.Send(resp); err != nil {
		t.Fatal(err)
	}
	want("held:ambient-error")
	clk.Advance(2 * time.Second)
	want("slow:resource-error")

	got := map[string]*statusv3.ClientConfig_GenericXdsConfig{}
	for _, g := range csds.ClientConfig(c, csds.Options{}).GenericXdsConfigs {
		got[g.Name] = g
	}
	if g := got["held"]; g.GetClientStatus() != adminv3.ClientResourceStatus_RECEIVED_ERROR || g.GetVersionInfo() != "v1" || g.GetXdsConfig() == nil ||
		!strings.Contains(g.GetErrorState().GetDetails(), "going away") || g.GetErrorState().GetLastUpdateAttempt() == nil || g.GetErrorState().GetFailedConfiguration() != nil {
		t.Errorf("held: %v, want RECEIVED_ERROR serving v1, the server's error in error_state", g)
	}
	if g := got["denied"]; g.GetClientStatus() != adminv3.ClientResourceStatus_RECEIVED_ERROR || g.GetXdsConfig() != nil ||
		!strings.Contains(g.GetErrorState().GetDetails(), "not for you") || g.GetErrorState().GetVersionInfo() != "" {
		t.Errorf("denied: %v, want RECEIVED_ERROR without a value, the server's error in error_state", g)
	}
	if g := got["slow"]; g.GetClientStatus() != adminv3.ClientResourceStatus_TIMEOUT || g.GetXdsConfig() != nil || g.GetErrorState().GetDetails() == "" {
		t.Errorf("slow: %v, want TIMEOUT with its error", g)
	}
}

// fakeCSDS is another CSDS service, such as grpc-go's, with one client of
// node "other", or failing with err.
type fakeCSDS struct {
	statusv3.UnimplementedClientStatusDiscoveryServiceServer
	err error
}

func (f fakeCSDS) FetchClientStatus(context.Context, *statusv3.ClientStatusRequest) (*statusv3.ClientStatusResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &statusv3.ClientStatusResponse{Config: []*statusv3.ClientConfig{{Node: &corev3.Node{Id: "other"}}}}, nil
}

// NewServer reports the inner service's clients, then its own; an error of
// the inner service fails the request rather than hide its clients.
func TestNewServerWithInner(t *testing.T) {
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "127.0.0.1:1", NodeID: "csds-node"}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := csds.NewServer(fakeCSDS{}, c).FetchClientStatus(context.Background(), &statusv3.ClientStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, cfg := range resp.GetConfig() {
		nodes = append(nodes, cfg.GetNode().GetId())
	}
	if len(nodes) != 2 || nodes[0] != "other" || nodes[1] != "csds-node" {
		t.Errorf("nodes %v, want [other csds-node]", nodes)
	}
	boom := errors.New("boom")
	if _, err := csds.NewServer(fakeCSDS{err: boom}, c).FetchClientStatus(context.Background(), &statusv3.ClientStatusRequest{}); !errors.Is(err, boom) {
		t.Errorf("with a failing inner service: %v, want its error", err)
	}
}

// Without google.golang.org/grpc/xds in the program (this test binary does
// not link it), grpc-go's admin.Register adds channelz only, and composes
// with Register in either order; CSDS then reports goxds's client.
func TestRegisterWithAdminEitherOrder(t *testing.T) {
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "127.0.0.1:1", NodeID: "csds-node"}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, adminFirst := range []bool{true, false} {
		s := grpc.NewServer()
		if adminFirst {
			cleanup, err := admin.Register(s)
			if err != nil {
				t.Fatal(err)
			}
			defer cleanup()
		}
		if err := csds.Register(s, c); err != nil {
			t.Fatalf("admin first %v: %v", adminFirst, err)
		}
		if !adminFirst {
			cleanup, err := admin.Register(s)
			if err != nil {
				t.Fatal(err)
			}
			defer cleanup()
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go s.Serve(lis)
		defer s.Stop()
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := statusv3.NewClientStatusDiscoveryServiceClient(cc).FetchClientStatus(ctx, &statusv3.ClientStatusRequest{})
		if err != nil {
			t.Fatalf("admin first %v: %v", adminFirst, err)
		}
		if len(resp.GetConfig()) != 1 || resp.GetConfig()[0].GetNode().GetId() != "csds-node" {
			t.Errorf("admin first %v: configs %v, want goxds's, node csds-node", adminFirst, resp.GetConfig())
		}
		if _, ok := s.GetServiceInfo()["grpc.channelz.v1.Channelz"]; !ok {
			t.Errorf("admin first %v: no channelz", adminFirst)
		}
	}
}
