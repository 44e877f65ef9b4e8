package httppath

import (
	"strings"
	"testing"

	"github.com/goxds/xds/resources"
)

// FuzzNormalize: any path and options give an error or a path that starts
// with "/", has no dot segment, no "//" and no bad %-encoding, and that
// normalizes to itself (so that what routing saw is what the handler is
// served, and a second pass cannot find another path); never a panic.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"/admin", "//admin", "/./admin", "/%61dmin", "/public/../admin", "/a%2F..%2Fb", "/a\\b", "/%zz", "/caf\xc3\xa9"} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, in string, act uint8) {
		o := Resolve(resources.PathNormalization{EscapedSlashes: resources.EscapedSlashesAction(act % 5)})
		out, _, err := Normalize(in, o)
		if err != nil {
			return
		}
		if !strings.HasPrefix(out, "/") || strings.Contains(out, "//") || check(out) != nil {
			t.Fatalf("Normalize(%q) = %q", in, out)
		}
		for _, s := range strings.Split(out, "/") {
			if s == "." || s == ".." {
				t.Fatalf("Normalize(%q) = %q keeps a dot segment", in, out)
			}
		}
		again, a2, err := Normalize(out, o)
		if err != nil || again != out || a2 != Continue {
			t.Fatalf("Normalize(%q) = %q, but again gives %q, %v, %v", in, out, again, a2, err)
		}
	})
}
