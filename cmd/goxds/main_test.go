package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// goxdsBin is the tool, built once by TestMain: the tests run it as a user
// does, exit status and all.
var goxdsBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "goxds-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goxdsBin = filepath.Join(dir, "goxds")
	args := []string{"build", "-o", goxdsBin}
	if raceEnabled {
		args = append(args, "-race") // the tool's races are found by its tests too
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building goxds:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runTimeout bounds one run of the tool. Runs take well under a second;
// the bound is for a loaded machine, and for a hang to fail, not stall.
const runTimeout = 60 * time.Second

// result is one run of the tool.
type result struct {
	stdout, stderr string
	code           int
}

// runOpts are what a run gets besides its arguments.
type runOpts struct {
	stdin string
	env   []string // added to a clean environment (no bootstrap variables)
}

// goxds runs the tool with args and returns what it printed and its exit
// status. The environment has no GRPC_XDS_BOOTSTRAP* unless opts set them.
func goxds(t *testing.T, opts runOpts, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goxdsBin, args...)
	cmd.Env = append(cleanEnv(), opts.env...)
	cmd.Stdin = strings.NewReader(opts.stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok || ctx.Err() != nil {
			t.Fatalf("goxds %q: %v (ctx: %v)\nstdout:\n%s\nstderr:\n%s", args, err, ctx.Err(), stdout.String(), stderr.String())
		}
		code = ee.ExitCode()
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// cleanEnv is the test's environment without the bootstrap variables, so
// that a developer's own bootstrap never leaks into a test.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GRPC_XDS_BOOTSTRAP") || strings.HasPrefix(kv, "GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// wantOneLineError checks that a run failed with code and said why in one
// line of stderr that starts "goxds <cmd>: " and contains want.
func wantOneLineError(t *testing.T, r result, code int, cmd, want string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit status %d, want %d; stdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "goxds "+cmd+": ") || !strings.Contains(lines[0], want) {
		t.Errorf("stderr = %q, want one line \"goxds %s: ...%s...\"", r.stderr, cmd, want)
	}
}

// writeFile writes content to name in a new temporary directory and
// returns its path.
func writeFile(t *testing.T, name string, content []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUsage(t *testing.T) {
	r := goxds(t, runOpts{})
	if r.code != exitBadInput || !strings.Contains(r.stderr, "usage: goxds <command>") {
		t.Errorf("no arguments: exit %d, stderr %q; want 2 and the usage", r.code, r.stderr)
	}
	r = goxds(t, runOpts{}, "help")
	for _, c := range commands {
		if r.code != 0 || !strings.Contains(r.stdout, c.name) {
			t.Errorf("help: exit %d, does not list %s:\n%s", r.code, c.name, r.stdout)
		}
	}
	wantOneLineErrorTop(t, goxds(t, runOpts{}, "frobnicate"), `unknown command "frobnicate"`)
	for _, c := range commands {
		r := goxds(t, runOpts{}, c.name, "-h")
		if r.code != 0 || !strings.Contains(r.stdout, "usage: goxds "+c.name) {
			t.Errorf("%s -h: exit %d, stdout %q", c.name, r.code, r.stdout)
		}
		wantOneLineError(t, goxds(t, runOpts{}, c.name, "-no-such-flag"), exitBadInput, c.name, "flag provided but not defined: -no-such-flag")
	}
}

func wantOneLineErrorTop(t *testing.T, r result, want string) {
	t.Helper()
	if r.code != exitBadInput || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, stderr %q; want 2 and one line with %q", r.code, r.stderr, want)
	}
}
