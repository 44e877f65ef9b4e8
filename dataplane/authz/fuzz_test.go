package authz_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/resources"
)

// TestFuzzSeedsDecode keeps the checked-in seeds of the fuzz targets
// inputs that decode (a server Listener; RBAC rules), so the fuzzers
// start past the decoder.
func TestFuzzSeedsDecode(t *testing.T) {
	rbac, ok := resources.LookupHTTPFilter("type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC")
	if !ok {
		t.Fatal("no RBAC filter registered")
	}
	decoders := map[string]func([]byte) error{
		"FuzzFindFilterChain": func(b []byte) error {
			_, l, err := resources.ListenerType.DecodeTyped(&anypb.Any{TypeUrl: resources.ListenerTypeURL, Value: b})
			if err == nil && l.Server == nil {
				t.Error("not a server Listener")
			}
			return err
		},
		"FuzzAuthorize": func(b []byte) error {
			c, err := rbac.ParseConfig(&anypb.Any{TypeUrl: "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC", Value: b})
			if err == nil && c.(*resources.RBACConfig).Rules == nil {
				t.Error("rules that let everything through")
			}
			return err
		},
	}
	for target, decode := range decoders {
		files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) < 3 {
			t.Errorf("%s: %d seeds, want at least 3", target, len(files))
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) != 4 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
				t.Fatalf("%s: not a corpus file of a []byte and two strings", file)
			}
			v, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if err := decode([]byte(v)); err != nil {
				t.Errorf("%s: %v", file, err)
			}
		}
	}
}
