package importcheck

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/goxds/xds"

// allowed lists, for each library package, the goxds packages its
// non-test code may import. Packages under example/ and testutils may
// import anything; nothing but tests and examples may import them. "*"
// allows every package but those two: the tools under cmd/ are built on
// the library alone, as a user's program would be.
var allowed = map[string][]string{
	"bootstrap": {},
	"resources": {"bootstrap"}, // a decoder's context: the sending server's config, the bootstrap
	"transport": {"bootstrap"},
	"client":    {"bootstrap", "resources", "transport"},
	"watchers":  {"client", "resources", "bootstrap"},
	"dataplane": {"watchers", "client", "resources", "bootstrap"}, // transport-neutral: see TestDataPlaneImportsNoTransport
	"grpcxds":   {"dataplane", "watchers", "client", "resources", "bootstrap", "internal"},
	"xdsserver": {"dataplane", "watchers", "client", "resources", "bootstrap", "internal"},
	"httpxds":   {"dataplane", "watchers", "client", "resources", "bootstrap", "internal"},
	"metrics":   {"client"}, // the adapters: otelxds, promxds
	"cmd":       {"*"},
	"xdsdebug":  {"client", "watchers", "resources", "bootstrap"},
	"testutils": nil, // anything
	"example":   nil,
	"internal":  nil,
}

type pkg struct {
	ImportPath string
	Imports    []string
}

func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		from := top(p.ImportPath)
		rules, known := allowed[from]
		if !known {
			t.Errorf("package %s is not in the import table; add it to allowed and to docs/ARCHITECTURE.md", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := top(imp)
			if to == from {
				continue
			}
			if to == "testutils" || to == "example" {
				if rules != nil {
					t.Errorf("%s imports %s: only tests and examples may", p.ImportPath, imp)
				}
				continue
			}
			if rules == nil {
				continue
			}
			if !contains(rules, to) && !contains(rules, "*") {
				t.Errorf("%s imports %s, against the import direction (allowed: %v)", p.ImportPath, imp, rules)
			}
		}
	}
}

// top returns the first path element of a goxds package under the module.
func top(importPath string) string {
	rest := strings.TrimPrefix(importPath, module+"/")
	first, _, _ := strings.Cut(rest, "/")
	return first
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// The metrics adapters' dependencies stay theirs: a program that uses the
// client, the tree watcher or the gRPC half without an adapter links
// neither OpenTelemetry nor Prometheus.
func TestCoreLinksNoMetricsSystem(t *testing.T) {
	core := []string{"bootstrap", "resources", "transport", "client", "client/csds", "watchers", "dataplane/...", "grpcxds", "xdsserver"}
	args := []string{"list", "-deps"}
	for _, p := range core {
		args = append(args, module+"/"+p)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "go.opentelemetry.io/") || strings.HasPrefix(dep, "github.com/prometheus/") {
			t.Errorf("the core depends on %s: only the metrics adapters may", dep)
		}
	}
}

// The data plane (routing, clusters, balancing, authorization) is shared
// by the gRPC and the net/http adapters, so it must link neither: a
// grpc-go or net/http type in it would tie the HTTP side to gRPC or the
// gRPC side to net/http. The check follows imports transitively through
// the data plane and third-party packages, and stops at the core packages
// it may import (resources, client, ...): those reach grpc-go through
// go-control-plane's generated service code and the ADS transport, which
// the rules above govern, and a data plane package that uses them gets
// no grpc-go or net/http type from them to use.
func TestDataPlaneImportsNoTransport(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", module+"/dataplane/...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	graph := make(map[string][]string)
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		graph[p.ImportPath] = p.Imports
	}
	var roots []string
	for p := range graph {
		if top(p) == "dataplane" && strings.HasPrefix(p, module+"/") {
			roots = append(roots, p)
		}
	}
	if len(roots) == 0 {
		t.Fatal("no package under dataplane/")
	}
	for _, path := range transportPaths(graph, roots) {
		t.Errorf("the data plane must not depend on grpc-go or net/http (the adapters bind it to them): %s", strings.Join(path, " → "))
	}
}

// isTransport reports whether p is grpc-go or net/http.
func isTransport(p string) bool {
	for _, t := range []string{"google.golang.org/grpc", "net/http"} {
		if p == t || strings.HasPrefix(p, t+"/") {
			return true
		}
	}
	return false
}

// transportPaths returns, for each grpc-go or net/http package that the
// roots reach without passing through a goxds package outside dataplane/,
// one import path from a root to it.
func transportPaths(graph map[string][]string, roots []string) [][]string {
	from := make(map[string]string) // package → the package that first reached it
	queue := append([]string(nil), roots...)
	for _, r := range roots {
		from[r] = ""
	}
	var found [][]string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if isTransport(p) {
			var path []string
			for q := p; q != ""; q = from[q] {
				path = append([]string{q}, path...)
			}
			found = append(found, path)
			continue
		}
		if strings.HasPrefix(p, module+"/") && top(p) != "dataplane" {
			continue // a core package: its own rules apply
		}
		for _, imp := range graph[p] {
			if _, seen := from[imp]; !seen {
				from[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return found
}

// The check finds a transport package reached through a third-party one,
// and not one reached only through the core.
func TestTransportPaths(t *testing.T) {
	graph := map[string][]string{
		module + "/dataplane/a": {module + "/resources", "example.com/lib", "strings"},
		module + "/resources":   {"google.golang.org/grpc/codes"},
		"example.com/lib":       {"net/http"},
		"net/http":              {"net/http/internal"},
	}
	got := transportPaths(graph, []string{module + "/dataplane/a"})
	want := module + "/dataplane/a → example.com/lib → net/http"
	if len(got) != 1 || strings.Join(got[0], " → ") != want {
		t.Errorf("transportPaths = %q, want one path %q", got, want)
	}
}
