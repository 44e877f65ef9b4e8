package resources

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
)

// FuzzExtAuthzConfig decodes arbitrary ExtAuthz bytes as sent by a trusted
// and by an untrusted server (FuzzDecodeListener decodes without either):
// nothing panics, and what decodes keeps gRFC A102's promise: from an
// untrusted server, an allowed target, no initial metadata, no
// credentials of the message's own; from a trusted one, initial metadata
// read as A102 reads a HeaderValue (checkInitialMetadata).
func FuzzExtAuthzConfig(f *testing.F) {
	trusted, untrusted := authzContexts()
	f.Fuzz(func(t *testing.T, b []byte) {
		a := &anypb.Any{TypeUrl: "type.googleapis.com/" + extAuthzName, Value: b}
		if c, err := parseExtAuthzAny(trusted, a); err == nil {
			g := c.(*ExtAuthzConfig).GrpcService
			if !g.Trusted || g.TargetURI == "" || g.ChannelCredentials == "" || g.Allowed != nil ||
				(g.TLS != nil) != (g.ChannelCredentials == GrpcChannelTLS) || (g.TLS != nil && g.TLS.RootInstance != "roots") {
				t.Fatalf("trusted: %+v", g)
			}
			checkInitialMetadata(t, g)
		}
		if c, err := parseExtAuthzAny(untrusted, a); err == nil {
			g := c.(*ExtAuthzConfig).GrpcService
			if g.Trusted || g.TargetURI != authzTarget || g.Allowed == nil || g.InitialMetadata != nil || g.AccessTokens != nil || g.ChannelCredentials != "" {
				t.Fatalf("untrusted: %+v", g)
			}
		}
	})
}

// checkInitialMetadata fails t unless g's initial metadata is its
// message's, each header's value its raw_value when set and else its
// value (gRFC A102, -bin or not), within A102's rules: a name gRPC can
// send, at most 16384 bytes, printable ASCII unless -bin.
func checkInitialMetadata(t *testing.T, g *GrpcService) {
	t.Helper()
	raw := g.Raw.GetInitialMetadata()
	if len(g.InitialMetadata) != len(raw) {
		t.Fatalf("%d initial metadata of %d", len(g.InitialMetadata), len(raw))
	}
	for i, h := range g.InitialMetadata {
		want := raw[i].GetValue()
		if len(raw[i].GetRawValue()) > 0 {
			want = string(raw[i].GetRawValue())
		}
		if h.Key != raw[i].GetKey() || h.Value != want {
			t.Fatalf("initial_metadata[%d] read as %q: %q, want %q: %q", i, h.Key, h.Value, raw[i].GetKey(), want)
		}
		if err := validMetadataKey(h.Key); err != nil || len(h.Value) > maxHeaderValueLen {
			t.Fatalf("initial_metadata[%d] %q (%d bytes) accepted: %v", i, h.Key, len(h.Value), err)
		}
		if !strings.HasSuffix(h.Key, "-bin") && strings.IndexFunc(h.Value, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
			t.Fatalf("initial_metadata[%d] %q: value %q is not printable ASCII", i, h.Key, h.Value)
		}
	}
}

// TestExtAuthzFuzzSeeds keeps the seeds (basic, full: most fields set,
// minimal, tls and xds: TlsCredentials and XdsCredentials, rawvalue:
// initial metadata in raw_value and value, -bin and not) ExtAuthz
// messages that decode from both servers.
func TestExtAuthzFuzzSeeds(t *testing.T) {
	trusted, untrusted := authzContexts()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzExtAuthzConfig", "*"))
	if err != nil || len(files) < 6 {
		t.Fatalf("%d seeds (%v), want at least 6", len(files), err)
	}
	for _, file := range files {
		b, err := readSeed(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, ctx := range []*DecodeContext{trusted, untrusted} {
			if _, err := parseExtAuthzAny(ctx, &anypb.Any{TypeUrl: "type.googleapis.com/" + extAuthzName, Value: b}); err != nil {
				t.Errorf("%s: %v", file, err)
			}
		}
	}
}
