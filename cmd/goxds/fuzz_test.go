package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/goxds/xds/resources"
)

// fuzzNames are the names a fuzzed file is read under: one per format
// family, and one that leaves the format to the content.
var fuzzNames = []string{"f.pb", "f.json", "f.yaml", "f.txtpb", "f"}

// FuzzReadInput feeds arbitrary bytes to validate's reader, under each
// kind of name, with and without -type. It must never panic, and what it
// accepts must be a response validate can judge: a type URL and at least
// one resource, each of which resourceName can look at.
func FuzzReadInput(f *testing.F) {
	// The example files are the seed corpus, under every name.
	seeds, err := filepath.Glob("testdata/*.*")
	if err != nil {
		f.Fatal(err)
	}
	for _, path := range seeds {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		for i := range fuzzNames {
			f.Add(uint8(i), data, false)
		}
		f.Add(uint8(len(fuzzNames)-1), data, true)
	}
	f.Add(uint8(1), []byte(`{"@type": "type.googleapis.com/envoy.service.discovery.v3.Resource", "name": "x"}`), false)
	f.Add(uint8(2), []byte("resources:\n- \"@type\": type.googleapis.com/envoy.service.discovery.v3.Resource\n"), false)
	f.Add(uint8(4), []byte("[type.googleapis.com/envoy.config.cluster.v3.Cluster] { name: \"c\" }"), false)
	f.Add(uint8(0), []byte("\x0a\x01x"), true)

	typeURL := resources.RouteConfigType.TypeURL()
	f.Fuzz(func(t *testing.T, which uint8, data []byte, withType bool) {
		want := ""
		if withType {
			want = typeURL
		}
		resp, format, err := readInput(fuzzNames[int(which)%len(fuzzNames)], data, want)
		if err != nil {
			if resp != nil {
				t.Fatalf("error %v with a response", err)
			}
			return
		}
		if format == "" || resp.GetTypeUrl() == "" || len(resp.GetResources()) == 0 {
			t.Fatalf("accepted %v (format %q): no type or no resources", resp, format)
		}
		if withType && (resp.GetTypeUrl() != typeURL || len(resp.GetResources()) != 1) {
			t.Fatalf("with -type: %v", resp)
		}
		if typ, ok := resources.Lookup(resp.GetTypeUrl()); ok {
			for _, a := range resp.GetResources() {
				resourceName(typ, a) // must not panic
			}
		}
	})
}
