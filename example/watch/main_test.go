package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 30 * time.Second

// noBootstrapEnv makes sure the environment does not turn the demo into
// the real-server mode.
func noBootstrapEnv(t *testing.T) {
	t.Setenv(bootstrap.EnvFile, "")
	t.Setenv(bootstrap.EnvConfig, "")
}

// The command with no flags runs the demo end to end: the whole tree, then
// each scripted change as a diff, and exits.
func TestDemo(t *testing.T) {
	noBootstrapEnv(t)
	for _, args := range [][]string{nil, {"-delta"}} {
		t.Run(strings.Join(append([]string{"args"}, args...), " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, args, &out); err != nil {
				t.Fatalf("run: %v\noutput:\n%s", err, out.String())
			}
			for _, want := range []string{
				// The tree.
				`listener "demo" → route config "demo-routes" (RDS)`,
				"\n  virtual host \"demo\" [demo demo.example.com]\n",
				"\n    route prefix \"/api/\" → weighted clusters\n",
				"\n      80 backend-v1  EDS \"backend-v1\"\n",
				"\n        locality us-east-1/us-east-1a  weight 1  priority 0\n",
				"\n          10.0.1.2:8080  HEALTHY\n",
				"\n      20 backend-v2  EDS \"backend-v2\"\n",
				"\n    route prefix \"/\" → cluster fallback\n",
				"\n      fallback  AGGREGATE → [backend-eu legacy-dns]\n",
				"\n        backend-eu  EDS \"backend-eu\"\n",
				"\n        legacy-dns  LOGICAL_DNS legacy.example.com:8080\n",
				// The changes.
				"\n--- endpoint 10.0.1.2:8080 of backend-v1 drained\n",
				"\n-           10.0.1.2:8080  HEALTHY\n+           10.0.1.2:8080  DRAINING\n",
				"\n+       50 backend-v1  EDS \"backend-v1\"\n",
				"\n+       50 backend-v2  ERROR: Cluster \"backend-v2\": resource does not exist",
			} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q; output:\n%s", want, out.String())
				}
			}
			// It ends saying the demo is over, not on the ERROR line of
			// the last change.
			last := out.String()[strings.LastIndex(out.String(), "\n---"):]
			if !strings.HasPrefix(last, "\n--- demo over:") || strings.Contains(last, "ERROR") {
				t.Errorf("output ends with %q, want the demo's end; output:\n%s", last, out.String())
			}
		})
	}
}

// Mistakes are reported, not hung on.
func TestDemoErrors(t *testing.T) {
	noBootstrapEnv(t)
	for _, tc := range []struct {
		args []string
		out  string
	}{
		{[]string{"-authority", "nowhere"}, "error: no virtual host matches the authority"},
		{[]string{"-listener", "nope"}, `error: Listener "nope": resource does not exist`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		var out bytes.Buffer
		err := run(ctx, tc.args, &out)
		cancel()
		if err == nil || !strings.Contains(out.String(), tc.out) {
			t.Errorf("run %q: error %v, output:\n%s\nwant an error and %q", tc.args, err, out.String(), tc.out)
		}
	}
}

func TestBadCommandLines(t *testing.T) {
	noBootstrapEnv(t)
	path := filepath.Join(t.TempDir(), "bootstrap.json")
	if err := os.WriteFile(path, testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "127.0.0.1:1", NodeID: "n"}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-no-such-flag"},
		{"extra-argument"},
		{"-bootstrap", filepath.Join(t.TempDir(), "missing.json")},
		{"-bootstrap", path}, // no -listener
		{"-param", "env"},
		{"-param", "=prod"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}

// syncBuffer is a bytes.Buffer for one writer and one waiting reader.
type syncBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	wake chan struct{}
}

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

// waitFor waits until the output contains want.
func (s *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(testTimeout)
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

// With a bootstrap the command follows that server until interrupted,
// printing each change; here the "real" server is a management server of
// the test's own, and the bootstrap comes from the environment.
func TestFollowServerFromBootstrap(t *testing.T) {
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Stop()
	st := demoState{weightV1: 80, weightV2: 20}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := ms.Update(ctx, "real-node", st.resources()); err != nil {
		t.Fatal(err)
	}
	t.Setenv(bootstrap.EnvFile, "")
	t.Setenv(bootstrap.EnvConfig, string(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: ms.Address(),
		APIType:   testutils.APITypeDelta,
		NodeID:    "real-node",
	})))

	out := &syncBuffer{wake: make(chan struct{})}
	done := make(chan error, 1)
	// With dynamic parameters: the stock server ignores the locators and
	// serves the plain names beside them.
	go func() {
		done <- run(ctx, []string{"-listener", "demo", "-authority", "demo.example.com", "-param", "env=prod"}, out)
	}()
	out.waitFor(t, "legacy-dns  LOGICAL_DNS legacy.example.com:8080\n")

	st.drained = true
	if err := ms.Update(ctx, "real-node", st.resources()); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "+           10.0.1.2:8080  DRAINING\n")
	cancel() // the Ctrl-C
	if err := <-done; err != nil {
		t.Errorf("run after interruption: %v", err)
	}
}
