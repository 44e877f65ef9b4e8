package resources

import (
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
)

// FuzzExtAuthzConfig decodes arbitrary ExtAuthz bytes as sent by a trusted
// and by an untrusted server (FuzzDecodeListener decodes without either):
// nothing panics, and what decodes keeps gRFC A102's promise: from an
// untrusted server, an allowed target, no initial metadata, no
// credentials of the message's own.
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
		}
		if c, err := parseExtAuthzAny(untrusted, a); err == nil {
			g := c.(*ExtAuthzConfig).GrpcService
			if g.Trusted || g.TargetURI != authzTarget || g.Allowed == nil || g.InitialMetadata != nil || g.AccessTokens != nil || g.ChannelCredentials != "" {
				t.Fatalf("untrusted: %+v", g)
			}
		}
	})
}

// TestExtAuthzFuzzSeeds keeps the seeds (basic, full: most fields set,
// minimal, tls and xds: TlsCredentials and XdsCredentials) ExtAuthz messages that decode from both servers.
func TestExtAuthzFuzzSeeds(t *testing.T) {
	trusted, untrusted := authzContexts()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzExtAuthzConfig", "*"))
	if err != nil || len(files) < 5 {
		t.Fatalf("%d seeds (%v), want at least 5", len(files), err)
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
