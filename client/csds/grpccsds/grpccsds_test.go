package grpccsds_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/admin"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/xds" // as in a program using grpc-go's xDS: admin.Register adds grpc-go's CSDS

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/client/csds"
	"github.com/goxds/xds/client/csds/grpccsds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// childEnv names the test a child process of this test binary runs.
const childEnv = "GOXDS_GRPCCSDS_CHILD"

// After grpc-go's admin.Register, which registers grpc-go's CSDS service,
// csds.Register and Register return an error naming the collision, and the
// process lives on (grpc would end it on the duplicate registration).
func TestRegisterAfterAdmin(t *testing.T) {
	s := grpc.NewServer()
	cleanup, err := admin.Register(s)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	c := newGoxdsClient(t, "127.0.0.1:1") // never contacted
	err = csds.Register(s, c)
	if !errors.Is(err, csds.ErrAlreadyRegistered) || !strings.Contains(err.Error(), "grpccsds.RegisterAdmin") {
		t.Errorf("csds.Register after admin.Register: %v, want ErrAlreadyRegistered naming grpccsds.RegisterAdmin", err)
	}
	if _, err := grpccsds.Register(s, c); !errors.Is(err, csds.ErrAlreadyRegistered) {
		t.Errorf("grpccsds.Register after admin.Register: %v, want ErrAlreadyRegistered", err)
	}
	if _, err := grpccsds.RegisterAdmin(s, c); !errors.Is(err, csds.ErrAlreadyRegistered) {
		t.Errorf("grpccsds.RegisterAdmin after admin.Register: %v, want ErrAlreadyRegistered", err)
	}
}

// The order the csds package doc warns against, csds.Register and then
// admin.Register, ends the process inside grpc-go, where goxds cannot
// intervene. Run in a child process; if grpc-go ever lets it pass, the doc
// is to be changed.
func TestAdminAfterRegisterDies(t *testing.T) {
	if os.Getenv(childEnv) == t.Name() {
		s := grpc.NewServer()
		if err := csds.Register(s, newGoxdsClient(t, "127.0.0.1:1")); err != nil {
			t.Fatal(err)
		}
		admin.Register(s) // dies here
		os.Exit(0)
	}
	out, err := runChild(t, nil)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "duplicate service registration") {
		t.Errorf("admin.Register after csds.Register: %v, output:\n%s\nwant grpc-go's fatal duplicate registration", err, out)
	}
}

// RegisterAdmin serves channelz and one CSDS service that reports grpc-go's
// xDS clients and goxds's, on the unary and streaming methods; a second
// CSDS registration of goxds's after it is an error, not a crash. Run in a
// child process: grpc-go reads the name of its bootstrap file from the
// environment once, when its xDS package starts.
func TestRegisterAdminReportsBoth(t *testing.T) {
	if os.Getenv(childEnv) != t.Name() {
		dir := t.TempDir()
		out, err := runChild(t, []string{"GRPC_XDS_BOOTSTRAP=" + filepath.Join(dir, "bootstrap.json"), "GRPC_XDS_BOOTSTRAP_CONFIG="})
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// grpc-go's client, watching L-grpc on a server of its own.
	grpcFS := startFake(t)
	boot := testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: grpcFS.Address(), NodeID: "grpc-go-node"})
	if err := os.WriteFile(os.Getenv("GRPC_XDS_BOOTSTRAP"), boot, 0o600); err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///L-grpc", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cc.Connect()
	waitForName(ctx, t, grpcFS, "L-grpc")

	// goxds's, watching L1, which it gets.
	fs := startFake(t)
	c := newGoxdsClient(t, fs.Address())
	got := make(chan struct{}, 1)
	client.WatchListener(c, "L1", client.WatcherFuncs[*resources.Listener]{
		OnUpdate: func(*resources.Listener) { got <- struct{}{} },
	})
	waitForName(ctx, t, fs, "L1")
	if err := fs.Send(testutils.SotWResponse(resources.ListenerTypeURL, "v1", "n1", testutils.Listener("L1", "route"))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("goxds's watcher got no L1")
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	cleanup, err := grpccsds.RegisterAdmin(s, c)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if err := csds.Register(s, c); !errors.Is(err, csds.ErrAlreadyRegistered) {
		t.Errorf("csds.Register after RegisterAdmin: %v, want ErrAlreadyRegistered", err)
	}
	if _, ok := s.GetServiceInfo()["grpc.channelz.v1.Channelz"]; !ok {
		t.Error("RegisterAdmin registered no channelz")
	}
	go s.Serve(lis)
	defer s.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	csdsClient := statusv3.NewClientStatusDiscoveryServiceClient(conn)
	resp, err := csdsClient.FetchClientStatus(ctx, &statusv3.ClientStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	checkBoth(t, "FetchClientStatus", resp)
	stream, err := csdsClient.StreamClientStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&statusv3.ClientStatusRequest{}); err != nil {
		t.Fatal(err)
	}
	sresp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	checkBoth(t, "StreamClientStatus", sresp)
	stream.CloseSend()
}

// checkBoth checks that resp reports grpc-go's client, L-grpc requested,
// and goxds's, L1 ACKed.
func checkBoth(t *testing.T, method string, resp *statusv3.ClientStatusResponse) {
	t.Helper()
	want := map[string]struct {
		name   string
		status adminv3.ClientResourceStatus
	}{
		"grpc-go-node": {"L-grpc", adminv3.ClientResourceStatus_REQUESTED},
		"goxds-node":   {"L1", adminv3.ClientResourceStatus_ACKED},
	}
	for _, cfg := range resp.GetConfig() {
		w, ok := want[cfg.GetNode().GetId()]
		if !ok {
			continue
		}
		for _, g := range cfg.GetGenericXdsConfigs() {
			if g.GetName() == w.name && g.GetClientStatus() == w.status {
				delete(want, cfg.GetNode().GetId())
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("%s: %v; missing %v", method, resp, want)
	}
}

// runChild runs the calling test alone in a child process of this test
// binary, with env added, and returns its output.
func runChild(t *testing.T, env []string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(append(os.Environ(), childEnv+"="+t.Name()), env...)
	return cmd.CombinedOutput()
}

func startFake(t *testing.T) *testutils.FakeServer {
	t.Helper()
	fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Stop)
	return fs
}

// waitForName waits for a request to fs that names name.
func waitForName(ctx context.Context, t *testing.T, fs *testutils.FakeServer, name string) {
	t.Helper()
	for {
		req, err := fs.NextRequest(ctx)
		if err != nil {
			t.Fatalf("waiting for a request for %s: %v", name, err)
		}
		for _, n := range req.GetResourceNames() {
			if n == name {
				return
			}
		}
	}
}

func newGoxdsClient(t *testing.T, addr string) *client.Client {
	t.Helper()
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: addr, NodeID: "goxds-node"}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
