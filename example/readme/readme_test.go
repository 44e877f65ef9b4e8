// Package readme_test holds the Go programs of the README, so that go vet and
// go build check them, and a test that the README shows them as they are.
package readme_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// blocks returns the code blocks of a markdown text in language lang.
func blocks(md, lang string) []string {
	var out []string
	var cur *strings.Builder
	for _, line := range strings.SplitAfter(md, "\n") {
		switch trimmed := strings.TrimSpace(line); {
		case cur == nil && trimmed == "```"+lang:
			cur = new(strings.Builder)
		case cur != nil && trimmed == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return out
}

// inOrder reports whether the kept lines of a diff (context and added
// ones) are lines of src, in order, white space at their ends aside. The
// removed lines are the code it changes from.
func inOrder(diff, src string) bool {
	lines := strings.Split(src, "\n")
	next := 0
	for _, d := range strings.Split(diff, "\n") {
		if d == "" || d[0] == '-' {
			continue
		}
		want := strings.TrimSpace(d[1:])
		if want == "" {
			continue
		}
		for next < len(lines) && strings.TrimSpace(lines[next]) != want {
			next++
		}
		if next == len(lines) {
			return false
		}
		next++
	}
	return true
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
// verbatim, every diff block shows changes to one of them (its context and
// added lines are the program's), and every program is in the README.
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
	shown := make(map[string]bool)
	for i, b := range blocks(string(md), "diff") {
		found := false
		for src, f := range programs {
			if inOrder(b, src) {
				shown[f], found = true, true
			}
		}
		if !found {
			t.Errorf("README diff block %d changes none of %v: each of its context and added lines must be a line of the program, in order:\n%s", i+1, files, b)
		}
	}
	for i, b := range blocks(string(md), "go") {
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
