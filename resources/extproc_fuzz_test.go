package resources

import (
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
)

// FuzzExtProcConfig decodes arbitrary ExternalProcessor and
// ExtProcPerRoute bytes as sent by a trusted and by an untrusted server:
// nothing panics, what decodes keeps gRFC A102's promise for an untrusted
// server (an allowed target, nothing of the message's own credentials or
// metadata), and the modes keep gRFC A93's rule that response bodies come
// with response trailers.
func FuzzExtProcConfig(f *testing.F) {
	trusted, untrusted := authzContexts()
	f.Fuzz(func(t *testing.T, b []byte) {
		top := &anypb.Any{TypeUrl: "type.googleapis.com/" + extProcName, Value: b}
		over := &anypb.Any{TypeUrl: "type.googleapis.com/" + extProcPerRouteName, Value: b}
		for _, ctx := range []*DecodeContext{trusted, untrusted} {
			var gs []*GrpcService
			if c, err := parseExtProcAny(ctx, top); err == nil {
				pc := c.(*ExtProcConfig)
				if pc.Modes.ResponseBody && !pc.Modes.ResponseTrailers || pc.DeferredClose <= 0 {
					t.Fatalf("config: %+v", pc)
				}
				gs = append(gs, pc.GrpcService)
			}
			if c, err := parseExtProcPerRouteAny(ctx, over); err == nil {
				if g := c.(*ExtProcPerRouteConfig).GrpcService; g != nil {
					gs = append(gs, g)
				}
			}
			for _, g := range gs {
				if ctx == trusted && (!g.Trusted || g.TargetURI == "" || g.ChannelCredentials == "" || g.Allowed != nil) {
					t.Fatalf("trusted: %+v", g)
				}
				if ctx == trusted {
					checkInitialMetadata(t, g)
				}
				if ctx == untrusted && (g.Trusted || g.TargetURI != authzTarget || g.Allowed == nil || g.InitialMetadata != nil || g.AccessTokens != nil || g.ChannelCredentials != "") {
					t.Fatalf("untrusted: %+v", g)
				}
			}
		}
	})
}

// TestExtProcFuzzSeeds keeps the seeds (basic, full: most fields set,
// override) messages that decode from both servers, as the top-level
// configuration or as the override.
func TestExtProcFuzzSeeds(t *testing.T) {
	trusted, untrusted := authzContexts()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzExtProcConfig", "*"))
	if err != nil || len(files) < 3 {
		t.Fatalf("%d seeds (%v), want at least 3", len(files), err)
	}
	for _, file := range files {
		b, err := readSeed(file)
		if err != nil {
			t.Fatal(err)
		}
		name := extProcName
		if filepath.Base(file) == "override" {
			name = extProcPerRouteName
		}
		for _, ctx := range []*DecodeContext{trusted, untrusted} {
			a := &anypb.Any{TypeUrl: "type.googleapis.com/" + name, Value: b}
			if name == extProcName {
				_, err = parseExtProcAny(ctx, a)
			} else {
				_, err = parseExtProcPerRouteAny(ctx, a)
			}
			if err != nil {
				t.Errorf("%s: %v", file, err)
			}
		}
	}
}
