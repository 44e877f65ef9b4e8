package rls

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/goxds/xds/testutils"
)

// parse parses a route lookup config given in the proto's JSON form.
func parse(t testing.TB, rlc string) (*Config, error) {
	t.Helper()
	a, err := testutils.RouteLookupClusterSpecifier(rlc)
	if err != nil {
		t.Fatal(err)
	}
	return ParseClusterSpecifier(a.GetValue())
}

// mustParse is parse that fails the test on an error.
func mustParse(t testing.TB, rlc string) *Config {
	t.Helper()
	cfg, err := parse(t, rlc)
	if err != nil {
		t.Fatalf("config %s: %v", rlc, err)
	}
	return cfg
}

const builders = `"grpcKeybuilders": [{"names": [{"service": "s"}], "headers": [{"key": "k", "names": ["x-k"]}]}]`

// A valid config gets gRPC's defaults and caps.
func TestParseDefaultsAndCaps(t *testing.T) {
	tests := []struct {
		name       string
		rlc        string
		want       Config
		wantKeyLen int
	}{{
		name: "unset ages and timeout",
		rlc:  `{` + builders + `, "lookupService": "svc:1", "cacheSizeBytes": "1000", "defaultTarget": "d"}`,
		want: Config{LookupService: "svc:1", LookupServiceTimeout: DefaultLookupServiceTimeout, MaxAge: MaxMaxAge, StaleAge: MaxMaxAge, CacheSizeBytes: 1000, DefaultTarget: "d"},
	}, {
		name: "ages and timeout set",
		rlc:  `{` + builders + `, "lookupService": "svc:1", "lookupServiceTimeout": "2s", "maxAge": "60s", "staleAge": "30s", "cacheSizeBytes": "1000"}`,
		want: Config{LookupService: "svc:1", LookupServiceTimeout: 2 * time.Second, MaxAge: time.Minute, StaleAge: 30 * time.Second, CacheSizeBytes: 1000},
	}, {
		name: "stale age over max age",
		rlc:  `{` + builders + `, "lookupService": "svc:1", "maxAge": "10s", "staleAge": "20s", "cacheSizeBytes": "1000"}`,
		want: Config{LookupService: "svc:1", LookupServiceTimeout: DefaultLookupServiceTimeout, MaxAge: 10 * time.Second, StaleAge: 10 * time.Second, CacheSizeBytes: 1000},
	}, {
		name: "ages and cache over their caps",
		rlc:  `{` + builders + `, "lookupService": "svc:1", "maxAge": "3600s", "staleAge": "1800s", "cacheSizeBytes": "1000000000"}`,
		want: Config{LookupService: "svc:1", LookupServiceTimeout: DefaultLookupServiceTimeout, MaxAge: MaxMaxAge, StaleAge: MaxMaxAge, CacheSizeBytes: MaxCacheSizeBytes},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustParse(t, tt.rlc)
			if got.Keys == nil {
				t.Fatal("no key builders")
			}
			got.Keys = nil
			if *got != tt.want {
				t.Errorf("config %+v; want %+v", *got, tt.want)
			}
		})
	}
}

// An invalid config is refused with an error naming what is wrong.
func TestParseRejects(t *testing.T) {
	const rest = `"lookupService": "svc:1", "cacheSizeBytes": "1000"`
	tests := []struct{ name, rlc, want string }{
		{"no key builders", `{` + rest + `}`, "a GrpcKeyBuilder is required"},
		{"builder without names", `{"grpcKeybuilders": [{}], ` + rest + `}`, "grpc_keybuilders[0] (GrpcKeyBuilder) has no names"},
		{"name without service", `{"grpcKeybuilders": [{"names": [{"method": "m"}]}], ` + rest + `}`, "names[0] has no service"},
		{"method with a slash", `{"grpcKeybuilders": [{"names": [{"service": "s", "method": "a/b"}]}], ` + rest + `}`, `method "a/b", which contains "/"`},
		{"path named twice", `{"grpcKeybuilders": [{"names": [{"service": "s"}]}, {"names": [{"service": "s"}]}], ` + rest + `}`, "grpc_keybuilders[1] (GrpcKeyBuilder): names[0]"},
		{"required match", `{"grpcKeybuilders": [{"names": [{"service": "s"}], "headers": [{"key": "k", "names": ["x"], "requiredMatch": true}]}], ` + rest + `}`, "required_match"},
		{"header key twice", `{"grpcKeybuilders": [{"names": [{"service": "s"}], "headers": [{"key": "k", "names": ["x"]}, {"key": "k", "names": ["y"]}]}], ` + rest + `}`, `key "k" is given twice`},
		{"header and constant key", `{"grpcKeybuilders": [{"names": [{"service": "s"}], "headers": [{"key": "k", "names": ["x"]}], "constantKeys": {"k": "v"}}], ` + rest + `}`, `key "k" is given twice`},
		{"extra key reusing a header's", `{"grpcKeybuilders": [{"names": [{"service": "s"}], "headers": [{"key": "k", "names": ["x"]}], "extraKeys": {"method": "k"}}], ` + rest + `}`, `extra_keys.method "k"`},
		{"no lookup service", `{` + builders + `, "cacheSizeBytes": "1000"}`, "lookup_service is empty"},
		{"stale age without max age", `{` + builders + `, ` + rest + `, "staleAge": "10s"}`, "stale_age is set but max_age is not"},
		{"no cache size", `{` + builders + `, "lookupService": "svc:1"}`, "cache_size_bytes is 0"},
		{"negative cache size", `{` + builders + `, "lookupService": "svc:1", "cacheSizeBytes": "-5"}`, "cache_size_bytes is -5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.rlc)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v; want one containing %q", err, tt.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "route_lookup_config: ") {
				t.Errorf("error %q does not say it is about route_lookup_config", err)
			}
		})
	}
}

// Bytes that are not the message, or carry out-of-range values, are
// refused, saying where.
func TestParseBadWire(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated tag", []byte{0xff}, "RouteLookupClusterSpecifier: malformed protobuf at byte 0"},
		{"truncated config", []byte{0x0a, 0x05, 0x12}, "RouteLookupClusterSpecifier: malformed protobuf at byte 1"},
		{"lookup service not UTF-8", []byte{0x0a, 0x03, 0x1a, 0x01, 0xff}, "lookup_service is not valid UTF-8"},
		{"duration out of range", inConfig(configMaxAge, durationBytes(315576000001, 0)), "max_age: 315576000001 seconds is out of range"},
		{"nanos out of range", inConfig(configMaxAge, durationBytes(1, 1e9)), "max_age: 1000000000 nanoseconds is out of range"},
		{"duration of two signs", inConfig(configLookupServiceTimeout, durationBytes(1, -1)), "lookup_service_timeout: seconds and nanos have different signs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseClusterSpecifier(tt.b)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v; want one containing %q", err, tt.want)
			}
		})
	}
}

// durationBytes encodes a google.protobuf.Duration.
func durationBytes(secs int64, nanos int32) []byte {
	b := protowire.AppendTag(nil, durationSeconds, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(secs))
	b = protowire.AppendTag(b, durationNanos, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(int64(nanos)))
}

// inConfig encodes a RouteLookupClusterSpecifier whose config has one
// length-delimited field.
func inConfig(field protowire.Number, v []byte) []byte {
	rlc := protowire.AppendTag(nil, field, protowire.BytesType)
	rlc = protowire.AppendBytes(rlc, v)
	b := protowire.AppendTag(nil, specifierRouteLookupConfig, protowire.BytesType)
	return protowire.AppendBytes(b, rlc)
}

// headers is a request's headers for tests.
type headers map[string][]string

func (h headers) Get(name string) (string, bool) {
	vs, ok := h[name]
	return strings.Join(vs, ","), ok
}

// A request's keys come from the builder of its method, else of its
// service: headers by the first name present (names matched in lower
// case, values joined), the extra keys and the constants; a request no
// builder matches has none.
func TestKeys(t *testing.T) {
	cfg := mustParse(t, `{"grpcKeybuilders": [
		{"names": [{"service": "pkg.S", "method": "M"}], "headers": [{"key": "user", "names": ["X-User", "x-alt"]}],
		 "extraKeys": {"host": "h", "service": "s", "method": "m"}, "constantKeys": {"c": "1"}},
		{"names": [{"service": "pkg.S"}, {"service": "pkg.T"}], "headers": [{"key": "user", "names": ["x-alt"]}]}],
		"lookupService": "svc:1", "cacheSizeBytes": "1000"}`)
	hs := headers{"x-user": {"ann", "bob"}, "x-alt": {"alt"}}
	tests := []struct {
		path string
		want map[string]string
	}{
		{"/pkg.S/M", map[string]string{"user": "ann,bob", "h": "example.com", "s": "pkg.S", "m": "M", "c": "1"}},
		{"/pkg.S/Other", map[string]string{"user": "alt"}},
		{"/pkg.T/M", map[string]string{"user": "alt"}},
		{"/pkg.U/M", map[string]string{}},
	}
	for _, tt := range tests {
		got, _ := cfg.Keys.Keys(&Request{Path: tt.path, Host: "example.com", Headers: hs})
		if len(got) != len(tt.want) {
			t.Errorf("%s: keys %v; want %v", tt.path, got, tt.want)
			continue
		}
		for k, v := range tt.want {
			if got[k] != v {
				t.Errorf("%s: keys %v; want %v", tt.path, got, tt.want)
				break
			}
		}
	}
	// The first name the request has wins; none: no key.
	got, _ := cfg.Keys.Keys(&Request{Path: "/pkg.S/M", Headers: headers{"x-alt": {"alt"}}})
	if got["user"] != "alt" {
		t.Errorf("keys %v; want user from x-alt", got)
	}
	got, _ = cfg.Keys.Keys(&Request{Path: "/pkg.S/M"})
	if _, ok := got["user"]; ok {
		t.Errorf("keys %v of a request without headers; want no user", got)
	}
	// Requests share a cache entry only with the same path and keys.
	_, a := cfg.Keys.Keys(&Request{Path: "/pkg.S/Other", Headers: headers{"x-alt": {"a"}}})
	_, b := cfg.Keys.Keys(&Request{Path: "/pkg.S/Other2", Headers: headers{"x-alt": {"a"}}})
	_, c := cfg.Keys.Keys(&Request{Path: "/pkg.S/Other", Headers: headers{"x-alt": {"b"}}})
	_, d := cfg.Keys.Keys(&Request{Path: "/pkg.S/Other", Headers: headers{"x-alt": {"a"}, "x-user": {"z"}}})
	if a == b || a == c || a != d {
		t.Errorf("cache keys %q %q %q %q: want the first and last alike, the others not", a, b, c, d)
	}
}
