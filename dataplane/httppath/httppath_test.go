package httppath

import (
	"errors"
	"strings"
	"testing"

	"github.com/goxds/xds/resources"
)

// defaults is what a Listener that sets none of the fields gets.
var defaults = Resolve(resources.PathNormalization{})

// TestBypassesNormalizeToAdmin: the classic RBAC bypasses of a policy on
// "/admin" all become "/admin" with the defaults, so that routing and RBAC
// judge them as "/admin" (Envoy's edge guide: normalize_path and
// merge_slashes "to minimize probability of path confusion
// vulnerabilities",
// https://www.envoyproxy.io/docs/envoy/latest/configuration/best_practices/edge).
func TestBypassesNormalizeToAdmin(t *testing.T) {
	for _, in := range []string{
		"/admin",
		"//admin",          // merge_slashes
		"/./admin",         // RFC 3986 5.2.4: "." segments go
		"/%61dmin",         // RFC 3986 6.2.2.2: unreserved characters decoded
		"/public/../admin", // RFC 3986 5.2.4: ".." removes the segment before it
		"/%2e%2E/admin",    // encoded dots are dots once decoded, above the root stays at the root
		"/public/%2e%2e/admin",
		"/public\\..\\admin", // a backslash is a slash (Chromium's canonicalization, Envoy's)
	} {
		got, act, err := Normalize(in, defaults)
		if err != nil || act != Continue || got != "/admin" {
			t.Errorf("Normalize(%q) = %q, %v, %v; want /admin, Continue, nil", in, got, act, err)
		}
	}
}

// TestNormalize: Envoy's HttpConnectionManager rules, one by one
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto:
// normalize_path, merge_slashes, path_with_escaped_slashes_action).
func TestNormalize(t *testing.T) {
	on := func(a resources.EscapedSlashesAction) Options {
		return Options{Normalize: true, MergeSlashes: true, EscapedSlashes: a}
	}
	tests := []struct {
		in      string
		o       Options
		want    string
		act     Action
		wantErr string
	}{
		{in: "/a/b", o: defaults, want: "/a/b"},
		{in: "/", o: defaults, want: "/"},
		{in: "/a/b/..", o: defaults, want: "/a/"},
		{in: "/a/.", o: defaults, want: "/a/"},
		{in: "/..", o: defaults, want: "/"},
		{in: "/a..b/.c", o: defaults, want: "/a..b/.c"},
		// Envoy's order: dot segments first, then slashes merged, so ".."
		// removes the empty segment before it, and the handler is served
		// the same path.
		{in: "/public//../admin", o: defaults, want: "/public/admin"},
		// Other percent-encodings stay encoded, with upper-case hex
		// (RFC 3986 6.2.2.1).
		{in: "/a%3fb%3F", o: defaults, want: "/a%3Fb%3F"},
		{in: "/caf\xc3\xa9 x", o: defaults, want: "/caf%C3%A9%20x"},
		// KEEP_UNCHANGED (the default): an escaped slash is no separator.
		{in: "/public%2F..%2Fadmin", o: defaults, want: "/public%2F..%2Fadmin"},
		{in: "/a%2fb", o: on(resources.EscapedSlashesReject), wantErr: "REJECT_REQUEST"},
		{in: "/a%5Cb", o: on(resources.EscapedSlashesReject), wantErr: "REJECT_REQUEST"},
		{in: "/a/b", o: on(resources.EscapedSlashesReject), want: "/a/b"},
		// UNESCAPE_AND_FORWARD: unescaped, then normalized and merged.
		{in: "/public%2F..%2Fadmin", o: on(resources.EscapedSlashesUnescapeAndForward), want: "/admin"},
		{in: "/a%5c%5cb", o: on(resources.EscapedSlashesUnescapeAndForward), want: "/a/b"},
		// UNESCAPE_AND_REDIRECT: to the path after normalization.
		{in: "/public%2F..%2F%61dmin", o: on(resources.EscapedSlashesUnescapeAndRedirect), want: "/admin", act: Redirect},
		{in: "/public/../admin", o: on(resources.EscapedSlashesUnescapeAndRedirect), want: "/admin", act: Continue},
		// normalize_path false: judged as received but for merged slashes.
		{in: "/./%61dmin//x", o: Options{MergeSlashes: true, EscapedSlashes: resources.EscapedSlashesKeep}, want: "/./%61dmin/x"},
		{in: "/a%zz", o: Options{EscapedSlashes: resources.EscapedSlashesKeep}, wantErr: "not %XX"},
		// Paths that cannot be normalized: 400.
		{in: "", o: defaults, wantErr: `does not start with "/"`},
		{in: "admin", o: defaults, wantErr: `does not start with "/"`},
		{in: "*", o: defaults, wantErr: `does not start with "/"`},
		{in: "/a%2", o: defaults, wantErr: "not %XX"},
		{in: "/a%g0", o: defaults, wantErr: "not %XX"},
		{in: "/a\x00b", o: defaults, wantErr: "control character 0x0"},
		{in: "/a\x7fb", o: defaults, wantErr: "control character 0x7f"},
		{in: "/a#frag", o: defaults, wantErr: "fragment"},
	}
	for _, tt := range tests {
		got, act, err := Normalize(tt.in, tt.o)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Normalize(%q, %+v) error = %v, want one with %q", tt.in, tt.o, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want || act != tt.act {
			t.Errorf("Normalize(%q, %+v) = %q, %v, %v; want %q, %v", tt.in, tt.o, got, act, err, tt.want, tt.act)
		}
	}
	if _, _, err := Normalize("/%2F", on(resources.EscapedSlashesReject)); !errors.Is(err, ErrEscapedSlash) {
		t.Errorf("REJECT_REQUEST error = %v, want ErrEscapedSlash", err)
	}
}

// TestResolve: the defaults the package doc states.
func TestResolve(t *testing.T) {
	if want := (Options{Normalize: true, MergeSlashes: true, EscapedSlashes: resources.EscapedSlashesKeep}); defaults != want {
		t.Errorf("Resolve(unset) = %+v, want %+v", defaults, want)
	}
	off := false
	got := Resolve(resources.PathNormalization{NormalizePath: &off, EscapedSlashes: resources.EscapedSlashesReject})
	if want := (Options{Normalize: false, MergeSlashes: true, EscapedSlashes: resources.EscapedSlashesReject}); got != want {
		t.Errorf("Resolve(normalize_path false, REJECT_REQUEST) = %+v, want %+v", got, want)
	}
}

// TestNormalizeCleanPathAllocatesNothing: the common path costs no
// allocation.
func TestNormalizeCleanPathAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _, _, _ = Normalize("/api/v1/users/42", defaults) }); n != 0 {
		t.Errorf("Normalize of a clean path allocates %v times", n)
	}
}

func BenchmarkNormalize(b *testing.B) {
	for _, p := range []string{"/api/v1/users/42", "/api/./v1//users/%34%32"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _, _ = Normalize(p, defaults)
			}
		})
	}
}
