package extproc

import (
	"strings"
	"testing"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// FuzzMutate applies a processor's arbitrary header change (a set, a
// removal) under no rules and under disallow_is_error rules: nothing
// panics, and a change taken never touches a pseudo-header, host or a
// grpc- header, nor leaves a value gRPC cannot send.
func FuzzMutate(f *testing.F) {
	f.Add("x-a", "v", "x-b", uint8(0), false)
	f.Add(":path", "/evil", "host", uint8(2), true)
	f.Add("grpc-status", "0", "grpc-timeout", uint8(3), false)
	f.Add("x-b-bin", "\x00\xff", "", uint8(1), true)
	f.Add("X-Upper", "v\n", "x y", uint8(7), false)
	f.Fuzz(func(t *testing.T, key, value, remove string, action uint8, disallowIsError bool) {
		cfg := &resources.ExtProcConfig{MutationRules: resources.HeaderMutationRules{DisallowIsError: disallowIsError}}
		c := &Call{p: &Processor{cfg: cfg}}
		in := map[string][]string{":path": {"/s/m"}, "host": {"h"}, "grpc-timeout": {"1S"}, "x-b": {"b"}}
		out, err := c.mutate(in, []extauthz.HeaderOption{{Key: key, Value: value, Action: extauthz.AppendAction(action)}}, []string{remove}, "f")
		if err != nil {
			return
		}
		for _, k := range []string{":path", "host", "grpc-timeout"} {
			if len(out[k]) != 1 || out[k][0] != in[k][0] {
				t.Fatalf("%s changed to %q", k, out[k])
			}
		}
		for k, vs := range out {
			if strings.HasPrefix(k, ":") || k == "host" || strings.HasPrefix(k, "grpc-") {
				if _, ok := in[k]; !ok {
					t.Fatalf("%s added", k)
				}
			}
			if strings.HasSuffix(k, "-bin") {
				continue
			}
			for _, v := range vs {
				for i := 0; i < len(v); i++ {
					if v[i] < 0x20 || v[i] > 0x7e {
						t.Fatalf("%s: value %q has byte 0x%02x", k, v, v[i])
					}
				}
			}
		}
	})
}
