// Command grpcgotests runs grpc-go's own xDS end-to-end tests with goxds in
// place of grpc-go's xDS support, and reports each test's result.
//
// It copies grpc-go's module (the version goxds requires, from the module
// cache) to a work directory, makes goxds a dependency of the copy (replaced
// by this checkout), substitutes goxds for grpc-go's xDS client, credentials
// and server in test/xds and in xds's external tests (rewrite.go says what,
// name for name; no assertion is touched), builds each package's test binary
// once and runs every test in a process of its own with a timeout.
//
//	go run ./internal/grpcgotests [-run regexp] [-timeout 2m] [-count 1] [-parallel 2] [-race] [-work dir] [-out results.md]
//
// It is not part of goxds's tests (it has none): it needs grpc-go's test
// packages, which only the copy can build. README.md has the latest results.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// suite is one grpc-go test package the harness runs.
type suite struct {
	dir   string            // in grpc-go's module
	files func(string) bool // which of its _test.go files are the tests to run
	drop  []string          // package-internal test files left out (they test grpc-go's internals)
}

var suites = []suite{
	{dir: "test/xds", files: func(string) bool { return true }},
	// server_test.go is package xds (internal): it tests grpc-go's server
	// code itself and cannot take goxds's.
	{dir: "xds", files: func(n string) bool { return strings.HasSuffix(n, "_ext_test.go") }, drop: []string{"server_test.go"}},
}

// testCase is one test: a method of grpc-go's grpctest suite (run as the
// subtest Test/<name>) or a top-level Test function.
type testCase struct {
	pkg, file, name string
	pattern         string // -test.run
}

// side says whether a test is about the client or the server, as issue 25
// counts them.
func (tc testCase) side() string {
	if tc.pkg == "xds" || strings.HasPrefix(tc.file, "xds_server_") || strings.Contains(tc.name, "OnServer") {
		return "server"
	}
	return "client"
}

type result struct {
	testCase
	pass     bool
	timedOut bool
	elapsed  time.Duration
	failures []string // the test's own failure lines
	output   string
}

func main() {
	runFlag := flag.String("run", "", "regexp: only tests whose name (Pkg:Name) matches")
	timeout := flag.Duration("timeout", 2*time.Minute, "per-test timeout")
	parallel := flag.Int("parallel", 2, "tests run at once")
	work := flag.String("work", "", "work directory (default: a new temporary one, kept)")
	out := flag.String("out", "", "also write the results as Markdown here")
	race := flag.Bool("race", false, "build the test binaries with -race")
	count := flag.Int("count", 1, "run each test this many times (in its one process); it passes if every run does")
	flag.Parse()
	if err := run(*runFlag, *timeout, *parallel, *count, *work, *out, *race); err != nil {
		fmt.Fprintln(os.Stderr, "grpcgotests:", err)
		os.Exit(1)
	}
}

func run(filter string, timeout time.Duration, parallel, count int, work, out string, race bool) error {
	var re *regexp.Regexp
	if filter != "" {
		var err error
		if re, err = regexp.Compile(filter); err != nil {
			return fmt.Errorf("-run: %w", err)
		}
	}
	root, err := goxdsRoot()
	if err != nil {
		return err
	}
	grpcDir, grpcVersion, err := goOutput(root, "list", "-m", "-f", "{{.Dir}} {{.Version}}", "google.golang.org/grpc")
	if err != nil {
		return err
	}
	parts := strings.Fields(grpcDir)
	if len(parts) != 2 {
		return fmt.Errorf("go list -m google.golang.org/grpc: %q (%s)", grpcDir, grpcVersion)
	}
	grpcDir, grpcVersion = parts[0], parts[1]
	if work == "" {
		if work, err = os.MkdirTemp("", "grpcgotests-"); err != nil {
			return err
		}
	}
	mod := filepath.Join(work, "grpc")
	fmt.Printf("grpc-go %s from %s\ncopy in %s\n", grpcVersion, grpcDir, mod)
	if err := os.RemoveAll(mod); err != nil {
		return err
	}
	if err := copyTree(grpcDir, mod); err != nil {
		return err
	}
	if err := addGoxds(mod, root); err != nil {
		return err
	}
	shim, err := os.ReadFile(filepath.Join(root, "internal/grpcgotests/testdata/goxds_shim_test.go"))
	if err != nil {
		return err
	}

	var cases []testCase
	totals := map[string]int{}
	for _, s := range suites {
		dir := filepath.Join(mod, s.dir)
		for _, d := range s.drop {
			if err := os.Remove(filepath.Join(dir, d)); err != nil {
				return err
			}
		}
		names, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		if err != nil {
			return err
		}
		for _, path := range names {
			base := filepath.Base(path)
			if !s.files(base) {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			newSrc, counts, err := rewriteFile(path, src)
			if err != nil {
				return err
			}
			for k, v := range counts {
				totals[k] += v
			}
			if err := os.WriteFile(path, newSrc, 0o644); err != nil {
				return err
			}
			tcs, err := listTests(s.dir, base, newSrc)
			if err != nil {
				return err
			}
			cases = append(cases, tcs...)
		}
		if err := os.WriteFile(filepath.Join(dir, "goxds_shim_test.go"), shim, 0o644); err != nil {
			return err
		}
	}
	fmt.Println("substituted:")
	var keys []string
	for k := range totals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %4d %s\n", totals[k], k)
	}

	bins := map[string]string{}
	for _, s := range suites {
		bin := filepath.Join(work, "bin", strings.ReplaceAll(s.dir, "/", "_")+".test")
		args := []string{"test", "-c", "-o", bin}
		if race {
			args = append(args, "-race")
		}
		args = append(args, "./"+s.dir)
		fmt.Printf("building %s\n", s.dir)
		if _, _, err := goOutput(mod, args...); err != nil {
			return err
		}
		bins[s.dir] = bin
	}

	var todo []testCase
	for _, tc := range cases {
		if re == nil || re.MatchString(tc.pkg+":"+tc.name) {
			todo = append(todo, tc)
		}
	}
	results := make([]result, len(todo))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(parallel, 1))
	for i, tc := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = runOne(bins[tc.pkg], filepath.Join(mod, tc.pkg), tc, timeout, max(count, 1))
			r := results[i]
			verdict := "PASS"
			if !r.pass {
				verdict = "FAIL"
			}
			fmt.Printf("%s %s:%s (%.1fs)\n", verdict, tc.pkg, tc.name, r.elapsed.Seconds())
		}()
	}
	wg.Wait()
	report := markdown(grpcVersion, totals, results)
	fmt.Print(report)
	if out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			return err
		}
	}
	for _, r := range results {
		logPath := filepath.Join(work, "logs", r.pkg, r.name+".log")
		if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err == nil {
			_ = os.WriteFile(logPath, []byte(r.output), 0o644)
		}
	}
	fmt.Printf("each test's output: %s\n", filepath.Join(work, "logs"))
	return nil
}

// goxdsRoot is the directory of goxds's go.mod, from the working directory up.
func goxdsRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/goxds/xds\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run it inside the goxds module (no go.mod of github.com/goxds/xds above the working directory)")
		}
		dir = parent
	}
}

// goOutput runs the go command in dir; GOFLAGS=-mod=mod lets it complete the
// copy's go.mod from goxds's requirements.
func goOutput(dir string, args ...string) (string, string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), stderr.String(), nil
}

// copyTree copies the module cache's read-only tree, writable.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
}

// addGoxds makes the copy require goxds, replaced by the checkout at root,
// with goxds's go.sum beside grpc-go's.
func addGoxds(mod, root string) error {
	if _, _, err := goOutput(mod, "mod", "edit",
		"-require=github.com/goxds/xds@v0.0.0-00010101000000-000000000000",
		"-replace=github.com/goxds/xds="+root); err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(mod, "go.sum"), os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(sum); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// listTests finds a file's tests: methods Test* of the grpctest suite type
// (subtests of Test) and top-level Test* functions other than Test itself.
func listTests(pkg, file string, src []byte) ([]testCase, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, src, 0)
	if err != nil {
		return nil, err
	}
	var out []testCase
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "Test" {
			continue
		}
		if fn.Recv != nil {
			id, ok := fn.Recv.List[0].Type.(*ast.Ident)
			if !ok || id.Name != "s" {
				continue
			}
			name := strings.TrimPrefix(fn.Name.Name, "Test")
			out = append(out, testCase{pkg, file, name, "^Test$/^" + regexp.QuoteMeta(name) + "$"})
			continue
		}
		out = append(out, testCase{pkg, file, fn.Name.Name, "^" + regexp.QuoteMeta(fn.Name.Name) + "$"})
	}
	return out, nil
}

var failLine = regexp.MustCompile(`^\s+\S+_test\.go:\d+: `)

// runOne runs one test in a process of its own.
func runOne(bin, dir string, tc testCase, timeout time.Duration, count int) result {
	total := timeout * time.Duration(count)
	ctx, cancel := context.WithTimeout(context.Background(), total+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", tc.pattern, "-test.v", "-test.timeout", total.String(), "-test.count", fmt.Sprint(count))
	cmd.Dir = dir
	start := time.Now()
	outb, err := cmd.CombinedOutput()
	r := result{testCase: tc, elapsed: time.Since(start), output: string(outb)}
	ranIt := false
	sc := bufio.NewScanner(bytes.NewReader(outb))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "--- PASS: ") || strings.Contains(line, "--- FAIL: ") {
			ranIt = true
		}
		if strings.HasPrefix(line, "panic: test timed out") {
			r.timedOut = true
		}
		if failLine.MatchString(line) {
			r.failures = append(r.failures, strings.TrimSpace(line))
		}
	}
	r.pass = err == nil && ranIt && !strings.Contains(string(outb), "--- FAIL")
	return r
}
