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
// import anything; nothing but tests and examples may import them.
var allowed = map[string][]string{
	"bootstrap": {},
	"resources": {},
	"transport": {"bootstrap"},
	"client":    {"bootstrap", "resources", "transport"},
	"watchers":  {"client", "resources", "bootstrap"},
	"dataplane": {"watchers", "client", "resources", "bootstrap"}, // transport-neutral: see TestDataPlaneImportsNoTransport
	"grpcxds":   {"dataplane", "watchers", "client", "resources", "bootstrap"},
	"xdsserver": {"dataplane", "watchers", "client", "resources", "bootstrap"},
	"metrics":   {"client"}, // the adapters: otelxds, promxds
	"testutils": nil,        // anything
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
			if !contains(rules, to) {
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
	core := []string{"bootstrap", "resources", "transport", "client", "client/csds", "watchers", "grpcxds", "xdsserver"}
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
