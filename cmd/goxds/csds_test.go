package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/grpc"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/client/csds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// csdsService runs a goxds client against a management server serving an
// ACKed Listener and a rejected Cluster, with the client's CSDS on a gRPC
// server of its own; it returns that server's address once the client
// holds both verdicts.
func csdsService(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	res := testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc"})
	res.Clusters = append(res.Clusters, &clusterv3.Cluster{Name: "static", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}})
	if err := ms.Update(ctx, "csds-node", res); err != nil {
		t.Fatal(err)
	}
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: "csds-node"}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	told := make(chan string, 2)
	t.Cleanup(client.WatchListener(c, "svc", client.WatcherFuncs[*resources.Listener]{OnUpdate: func(*resources.Listener) { told <- "svc" }}))
	t.Cleanup(client.WatchCluster(c, "static", client.WatcherFuncs[*resources.Cluster]{OnResourceError: func(error) { told <- "static" }}))
	for range 2 {
		select {
		case <-told:
		case <-ctx.Done():
			t.Fatal("the client never had its verdicts")
		}
	}

	s := grpc.NewServer()
	if err := csds.Register(s, c); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// csds prints each resource's type, name, status, version and error, and
// -json the whole response.
func TestCSDS(t *testing.T) {
	addr := csdsService(t)
	r := goxds(t, runOpts{}, "csds", addr)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
	}
	lines := strings.Split(r.stdout, "\n")
	if !strings.HasPrefix(lines[0], `client 1 of 1: node "csds-node", goxds `) {
		t.Errorf("first line %q", lines[0])
	}
	fields := func(prefix string) []string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 1 && f[0] == prefix[:strings.IndexByte(prefix, ' ')] && f[1] == prefix[strings.IndexByte(prefix, ' ')+1:] {
				return f
			}
		}
		t.Errorf("no row for %s; output:\n%s", prefix, r.stdout)
		return nil
	}
	if f := fields("TYPE NAME"); f != nil && strings.Join(f, " ") != "TYPE NAME STATUS VERSION ERROR" {
		t.Errorf("header %q", f)
	}
	if f := fields("Listener svc"); f != nil && (f[2] != "ACKED" || f[3] != "1" || len(f) != 4) {
		t.Errorf("Listener row %q", f)
	}
	if f := fields("Cluster static"); f != nil && (f[2] != "NACKED" || f[3] != "-" || !strings.Contains(strings.Join(f[4:], " "), `version "1" rejected: Cluster "static": type: STATIC is not supported`)) {
		t.Errorf("Cluster row %q", f)
	}

	r = goxds(t, runOpts{}, "csds", "-json", addr)
	var resp struct {
		Config []struct {
			Node              struct{ ID string }
			GenericXdsConfigs []struct {
				TypeURL, Name, ClientStatus string
				XdsConfig                   json.RawMessage
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil || r.code != 0 || len(resp.Config) != 1 || resp.Config[0].Node.ID != "csds-node" {
		t.Fatalf("-json: exit %d, %v, output:\n%s", r.code, err, r.stdout)
	}
	found := false
	for _, g := range resp.Config[0].GenericXdsConfigs {
		if g.Name == "svc" && g.ClientStatus == "ACKED" && len(g.XdsConfig) > 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("-json lacks the ACKed Listener with its contents:\n%s", r.stdout)
	}
}

func TestCSDSErrors(t *testing.T) {
	// A port nobody listens on: the deadline ends the wait, one line.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	start := time.Now()
	wantOneLineError(t, goxds(t, runOpts{}, "csds", "-timeout", "500ms", dead), exitFailed, "csds", "asking "+dead+" for its client status: rpc error: code = DeadlineExceeded")
	if d := time.Since(start); d > runTimeout/2 {
		t.Errorf("took %v", d)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "want one address (host:port) of a CSDS service, got 0 arguments"},
		{[]string{"-ca", "x.pem", "a:1"}, "-ca, -cert and -key need -tls"},
		{[]string{"-tls", "-cert", "c.pem", "a:1"}, "-cert and -key go together"},
		{[]string{"-tls", "-ca", "/nonexistent/ca.pem", "a:1"}, "-ca: open /nonexistent/ca.pem"},
		{[]string{"-timeout", "0s", "a:1"}, "-timeout must be positive"},
	} {
		wantOneLineError(t, goxds(t, runOpts{}, append([]string{"csds"}, c.args...)...), exitBadInput, "csds", c.want)
	}
}
