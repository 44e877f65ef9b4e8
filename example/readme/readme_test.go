// Package readme_test holds the Go programs of the README, so that go vet and
// go build check them, and a test that the README shows them as they are.
package readme_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goBlocks returns the ```go code blocks of a markdown text.
func goBlocks(md string) []string {
	var blocks []string
	var cur *strings.Builder
	for _, line := range strings.SplitAfter(md, "\n") {
		switch trimmed := strings.TrimSpace(line); {
		case cur == nil && trimmed == "```go":
			cur = new(strings.Builder)
		case cur != nil && trimmed == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return blocks
}

// program returns a Go file from its package clause on: the doc comment
// above it says why the file exists, which the README has no need of.
func program(src string) string {
	if i := strings.Index(src, "package main\n"); i >= 0 {
		return src[i:]
	}
	return src
}

// Every Go block of the README is one of the programs beside this test,
// verbatim, and every program is in the README.
func TestREADMEShowsTheProgramsAsTheyAre(t *testing.T) {
	md, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*/main.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no programs beside the test (%v)", err)
	}
	programs := make(map[string]string)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		programs[program(string(src))] = f
	}
	blocks := goBlocks(string(md))
	shown := make(map[string]bool)
	for i, b := range blocks {
		f, ok := programs[b]
		if !ok {
			t.Errorf("README Go block %d is none of %v; copy the program it shows into a directory here (from its package clause on):\n%s", i+1, files, b)
			continue
		}
		shown[f] = true
	}
	for _, f := range files {
		if !shown[f] {
			t.Errorf("%s is not shown in the README", f)
		}
	}
}
