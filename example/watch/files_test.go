package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

// The README's file source: the command follows the YAML files of
// testdata/files, with no server, and prints each change saved to them.
func TestFollowFiles(t *testing.T) {
	noBootstrapEnv(t)
	dir := t.TempDir()
	entries, err := os.ReadDir(filepath.Join("testdata", "files"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("testdata", "files", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	out := &syncBuffer{wake: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-bootstrap", filepath.Join(dir, "bootstrap.json"), "-listener", "svc"}, out)
	}()
	out.waitFor(t, "127.0.0.1:9090  UNKNOWN\n")

	path := filepath.Join(dir, "endpoints.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	moved := strings.Replace(string(data), "port_value: 9090", "port_value: 9091", 1)
	if err := testutils.WriteFileAtomically(path, []byte(moved)); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "127.0.0.1:9091")
	cancel() // the Ctrl-C
	if err := <-done; err != nil {
		t.Errorf("run after interruption: %v", err)
	}
}

// The bootstrap of testdata/files is valid as it stands.
func TestFilesBootstrap(t *testing.T) {
	c, err := bootstrap.Load(filepath.Join("testdata", "files", "bootstrap.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Servers[0]; s.APIType != bootstrap.APITypeFilesystem || len(s.ResourceFiles) != 4 {
		t.Fatalf("server %v, want FILESYSTEM with four files", s)
	}
}
