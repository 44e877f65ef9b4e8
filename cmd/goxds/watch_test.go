package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// running is the tool running in the background, as watch runs until
// interrupted.
type running struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	exited chan struct{} // closed once the process has ended
}

// start runs the tool in the background; the test ends it with
// interrupt, or it is killed at the end of the test.
func start(t *testing.T, opts runOpts, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	r := &running{cmd: exec.CommandContext(ctx, goxdsBin, args...), stdout: newSyncBuffer(), stderr: newSyncBuffer(), exited: make(chan struct{})}
	r.cmd.Env = append(cleanEnv(), opts.env...)
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	if err := r.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		_ = r.cmd.Wait() // the exit status is read from ProcessState
		cancel()
		close(r.exited)
	}()
	t.Cleanup(func() {
		cancel() // kills it if the test ended first
		<-r.exited
	})
	return r
}

// interrupt sends SIGINT (Ctrl-C) and returns the exit status.
func (r *running) interrupt(t *testing.T) int {
	t.Helper()
	if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.exited:
	case <-time.After(runTimeout):
		t.Fatal("goxds did not end after SIGINT")
	}
	return r.cmd.ProcessState.ExitCode()
}

// syncBuffer is a buffer for one writer and waiting readers.
type syncBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	wake chan struct{} // closed and replaced at each write
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{wake: make(chan struct{})} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	close(s.wake)
	s.wake = make(chan struct{})
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the output has n lines for which ok holds, and
// returns them.
func (s *syncBuffer) waitFor(t *testing.T, what string, n int, ok func(line string) bool) []string {
	t.Helper()
	deadline := time.After(runTimeout)
	for {
		s.mu.Lock()
		var found []string
		for _, l := range strings.SplitAfter(s.b.String(), "\n") {
			if strings.HasSuffix(l, "\n") && ok(l) {
				found = append(found, l)
			}
		}
		wake := s.wake
		s.mu.Unlock()
		if len(found) >= n {
			return found
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("output never had %s; output:\n%s", what, s.String())
		}
	}
}

func (s *syncBuffer) waitForText(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(runTimeout)
	for {
		s.mu.Lock()
		ok, wake := strings.Contains(s.b.String(), want), s.wake
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("output never contained %q; output:\n%s", want, s.String())
		}
	}
}

// watchServer is a management server serving listener "svc" → route →
// cluster "c1" with endpoints on ports, and a bootstrap for it in the
// environment.
func watchServer(t *testing.T, apiType string) (ms *testutils.ManagementServer, serve func(ports ...uint32), env []string) {
	t.Helper()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	serve = func(ports ...uint32) {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		if err := ms.Update(ctx, "watch-node", testutils.DefaultResources(testutils.ResourceParams{
			ListenerName: "svc", ClusterNames: []string{"c1"}, Ports: ports,
		})); err != nil {
			t.Fatal(err)
		}
	}
	boot := testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), APIType: apiType, NodeID: "watch-node"})
	return ms, serve, []string{"GRPC_XDS_BOOTSTRAP_CONFIG=" + string(boot)}
}

// watch prints the tree from the server, then each change as a diff,
// until interrupted, which is a normal end (status 0). Over SotW and
// delta.
func TestWatchFollowsTheTree(t *testing.T) {
	for _, api := range []string{testutils.APITypeSotW, testutils.APITypeDelta} {
		t.Run(api, func(t *testing.T) {
			_, serve, env := watchServer(t, api)
			serve(8080)
			r := start(t, runOpts{env: env}, "watch", "-listener", "svc")
			// The tree as watchers prints it.
			r.stdout.waitForText(t, "following listener \"svc\" (Ctrl-C to stop)\n"+
				"listener \"svc\" http_filters=[router]\n"+
				"  route_config \"svc-route\" (RDS)\n"+
				"    virtual_host \"svc-route-vhost\" domains=[*]\n"+
				"      route prefix \"/\" -> cluster \"c1\"\n"+
				"        cluster \"c1\" EDS lb=round_robin in wrr_locality\n"+
				"          locality {region=\"\" zone=\"\" sub_zone=\"\"} weight=1 priority=0\n"+
				"            endpoint 127.0.0.1:8080 UNKNOWN\n")
			serve(8080, 9090)
			// The change: the new line, below the lines above it.
			r.stdout.waitForText(t, "\n            locality {region=\"\" zone=\"\" sub_zone=\"\"} weight=1 priority=0\n"+
				"+             endpoint 127.0.0.1:9090 UNKNOWN\n")
			if !strings.Contains(r.stdout.String(), "\n--- change at ") {
				t.Errorf("the change has no title; output:\n%s", r.stdout.String())
			}
			if code := r.interrupt(t); code != 0 {
				t.Errorf("exit status after SIGINT: %d; stderr:\n%s", code, r.stderr.String())
			}
		})
	}
}

// -json prints one object per event, a snapshot each time the tree
// changes.
func TestWatchJSON(t *testing.T) {
	_, serve, env := watchServer(t, "")
	serve(8080)
	r := start(t, runOpts{env: env}, "watch", "-json", "-listener", "svc")
	isSnap := func(l string) bool { return strings.Contains(l, `"event":"snapshot"`) }
	first := r.stdout.waitFor(t, "a snapshot", 1, isSnap)[0]
	serve(8080, 9090)
	second := r.stdout.waitFor(t, "a second snapshot", 2, isSnap)[1]
	if code := r.interrupt(t); code != 0 {
		t.Errorf("exit status after SIGINT: %d", code)
	}
	for i, line := range []string{first, second} {
		var ev eventJSON
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		tree := ev.Tree
		if ev.Event != "snapshot" || tree == nil || tree.Kind != watchers.TreeListener || tree.Name != "svc" {
			t.Fatalf("snapshot %d: %s", i+1, line)
		}
		// The endpoints of cluster c1, found by kind and name.
		var endpoints []string
		var walk func(n *watchers.TreeNode, inC1 bool)
		walk = func(n *watchers.TreeNode, inC1 bool) {
			inC1 = inC1 || (n.Kind == watchers.TreeCluster && n.Name == "c1")
			if inC1 && n.Kind == watchers.TreeEndpoint {
				endpoints = append(endpoints, n.Name)
			}
			for _, c := range n.Children {
				walk(c, inC1)
			}
		}
		walk(tree, false)
		if want := []string{"127.0.0.1:8080", "127.0.0.1:9090"}[:i+1]; !slices.Equal(endpoints, want) {
			t.Errorf("snapshot %d: endpoints of c1 %q, want %q; %s", i+1, endpoints, want, line)
		}
		if _, err := time.Parse(time.RFC3339Nano, ev.Time); err != nil {
			t.Errorf("snapshot %d time %q: %v", i+1, ev.Time, err)
		}
	}
	if strings.Contains(r.stdout.String(), "following") {
		t.Errorf("-json output has text in it:\n%s", r.stdout.String())
	}
}

// A listener the server does not have is an error line, and the watch
// goes on (it may come later).
func TestWatchMissingListener(t *testing.T) {
	_, serve, env := watchServer(t, "")
	serve(8080)
	r := start(t, runOpts{env: env}, "watch", "-listener", "nope")
	r.stdout.waitForText(t, "error: Listener \"nope\": resource does not exist")
	if code := r.interrupt(t); code != 0 {
		t.Errorf("exit status after SIGINT: %d", code)
	}
}

func TestWatchBadCommandLines(t *testing.T) {
	boot := writeFile(t, "b.json", testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "127.0.0.1:1", NodeID: "n"}))
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"-bootstrap", boot}, nil, "-listener is required"},
		{[]string{"-listener", "x"}, nil, "no bootstrap: give a file, or set GRPC_XDS_BOOTSTRAP"},
		{[]string{"-listener", "x", "-bootstrap", writeFile(t, "bad.json", []byte(`{"xds_servers": 1}`))}, nil, "xds_servers"},
		{[]string{"-listener", "x"}, []string{"GRPC_XDS_BOOTSTRAP_CONFIG={"}, "GRPC_XDS_BOOTSTRAP_CONFIG"},
		{[]string{"-listener", "x", "-param", "env"}, nil, `"env": want key=value`},
		{[]string{"-listener", "x", "extra"}, nil, "unexpected arguments"},
	} {
		wantOneLineError(t, goxds(t, runOpts{env: c.env}, append([]string{"watch"}, c.args...)...), exitBadInput, "watch", c.want)
	}
}
