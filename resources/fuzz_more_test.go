package resources

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Fuzz targets for the SDS, RTDS, SRDS and VHDS decoders, in the manner of
// fuzz_test.go: no panics, and whatever decodes keeps the decoder's
// promises. Seed corpora live in testdata/fuzz/<target>/.

func FuzzDecodeSecret(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		name, s, err := SecretType.DecodeTyped(nil, &anypb.Any{TypeUrl: SecretTypeURL, Value: b})
		checkNoKeyShown(t, b, func() string {
			if err != nil {
				return err.Error()
			}
			var out strings.Builder
			for _, verb := range []string{"%v", "%+v", "%#v", "%x"} {
				fmt.Fprintf(&out, verb, s)
				if c := s.TLSCertificate; c != nil {
					fmt.Fprintf(&out, verb, *c)
				}
			}
			return out.String()
		})
		if err != nil {
			return
		}
		if name == "" || name != s.Name || name != s.Raw.GetName() {
			t.Fatalf("name %q, value %q, raw %q", name, s.Name, s.Raw.GetName())
		}
		set := 0
		for _, ok := range []bool{s.TLSCertificate != nil, s.ValidationContext != nil, s.SessionTicketKeys != nil, s.GenericSecret != nil} {
			if ok {
				set++
			}
		}
		if set != 1 {
			t.Fatalf("%d kinds of secret set in %v", set, s)
		}
		switch s.Kind {
		case SecretTLSCertificate:
			checkDataSource(t, s.TLSCertificate.CertificateChain)
			checkDataSource(t, s.TLSCertificate.PrivateKey)
		case SecretValidationContext:
			if ca := s.ValidationContext.TrustedCA; ca != nil {
				checkDataSource(t, *ca)
			}
			for _, m := range s.ValidationContext.SubjectAltNames {
				if m.Type == tlsv3.SubjectAltNameMatcher_OTHER_NAME && m.OID == "" {
					t.Fatal("OTHER_NAME matcher without an OID")
				}
				m.Matcher.Match("spiffe://cluster.local/ns/a/sa/b")
			}
		case SecretSessionTicketKeys:
			if len(s.SessionTicketKeys) == 0 {
				t.Fatal("no session ticket keys")
			}
			for _, k := range s.SessionTicketKeys {
				checkDataSource(t, k)
			}
		case SecretGeneric:
			g := s.GenericSecret
			if (g.Secret == nil) == (len(g.Secrets) == 0) {
				t.Fatalf("generic secret with secret %v and %d secrets", g.Secret, len(g.Secrets))
			}
			if g.Secret != nil {
				checkDataSource(t, *g.Secret)
			}
			for k, d := range g.Secrets {
				if k == "" {
					t.Fatal("generic secret with an empty name")
				}
				checkDataSource(t, d)
			}
		default:
			t.Fatalf("unknown kind %v", s.Kind)
		}
	})
}

// checkNoKeyShown fails t if the inline private key in the Secret encoded
// in b appears in shown(). Keys shorter than 16 bytes, or that some other
// field of the secret also holds, are not checked: they could be in the
// output for an innocent reason.
func checkNoKeyShown(t *testing.T, b []byte, shown func() string) {
	t.Helper()
	m := new(tlsv3.Secret)
	if proto.Unmarshal(b, m) != nil {
		return
	}
	pk := m.GetTlsCertificate().GetPrivateKey()
	key := pk.GetInlineBytes()
	if key == nil {
		key = []byte(pk.GetInlineString())
	}
	if len(key) < 16 {
		return
	}
	m.GetTlsCertificate().PrivateKey = nil
	rest, err := proto.Marshal(m)
	if err != nil || bytes.Contains(rest, key) {
		return
	}
	if out := shown(); strings.Contains(out, string(key)) {
		t.Fatalf("the private key shows in %q", out)
	}
}

func checkDataSource(t *testing.T, d DataSource) {
	t.Helper()
	switch d.Kind() {
	case DataSourceFilename:
		if d.Filename() == "" || d.Inline() != nil {
			t.Fatalf("bad filename source %v", d)
		}
	case DataSourceEnvironmentVariable:
		if d.EnvironmentVariable() == "" || d.Inline() != nil {
			t.Fatalf("bad environment variable source %v", d)
		}
	case DataSourceInlineBytes, DataSourceInlineString:
		if len(d.Inline()) == 0 || d.Filename() != "" || d.EnvironmentVariable() != "" {
			t.Fatalf("bad inline source %v", d)
		}
	default:
		t.Fatalf("unknown kind %v", d.Kind())
	}
}

func FuzzDecodeRuntime(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		name, r, err := RuntimeType.DecodeTyped(nil, &anypb.Any{TypeUrl: RuntimeTypeURL, Value: b})
		if err != nil {
			return
		}
		if name == "" || name != r.Name || name != r.Raw.GetName() {
			t.Fatalf("name %q, value %q, raw %q", name, r.Name, r.Raw.GetName())
		}
		keys := r.Keys()
		if !sort.StringsAreSorted(keys) {
			t.Fatalf("Keys not sorted: %q", keys)
		}
		for i, k := range keys {
			if k == "" || (i > 0 && keys[i-1] == k) {
				t.Fatalf("bad or repeated key %q", k)
			}
			v, ok := r.LookupValue(k)
			if !ok || v == nil {
				t.Fatalf("key %q has no value", k)
			}
			_, isString := r.LookupString(k)
			switch kind := v.GetKind().(type) {
			case *structpb.Value_StructValue:
				if !isRuntimeLeaf(kind.StructValue) || isString {
					t.Fatalf("key %q holds a level, or a struct reads as a string", k)
				}
			case *structpb.Value_NumberValue:
				if math.IsInf(kind.NumberValue, 0) || math.IsNaN(kind.NumberValue) {
					t.Fatalf("key %q holds %v", k, kind.NumberValue)
				}
				if n, ok := r.LookupNumber(k); !ok || n != kind.NumberValue || !isString {
					t.Fatalf("number at %q reads as %v, %v", k, n, ok)
				}
			case *structpb.Value_BoolValue:
				if b, ok := r.LookupBool(k); !ok || b != kind.BoolValue || !isString {
					t.Fatalf("bool at %q reads as %v, %v", k, b, ok)
				}
			case *structpb.Value_StringValue:
				if n, ok := r.LookupNumber(k); ok && (math.IsInf(n, 0) || math.IsNaN(n)) {
					t.Fatalf("string at %q reads as %v", k, n)
				}
				r.LookupBool(k)
				if !isString {
					t.Fatalf("string at %q does not read as one", k)
				}
			default:
				t.Fatalf("key %q holds %T", k, kind)
			}
		}
	})
}

func FuzzDecodeScopedRouteConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		name, s, err := ScopedRouteConfigType.DecodeTyped(nil, &anypb.Any{TypeUrl: ScopedRouteConfigTypeURL, Value: b})
		if err != nil {
			return
		}
		if name == "" || name != s.Name || name != s.Raw.GetName() {
			t.Fatalf("name %q, value %q, raw %q", name, s.Name, s.Raw.GetName())
		}
		if (s.RouteConfigName == "") == (s.InlineRouteConfig == nil) {
			t.Fatalf("want exactly one of RouteConfigName %q and an inline route config", s.RouteConfigName)
		}
		if len(s.Key) == 0 || len(s.Key) != len(s.Raw.GetKey().GetFragments()) {
			t.Fatalf("key %q from %d fragments", s.Key, len(s.Raw.GetKey().GetFragments()))
		}
		if s.InlineRouteConfig != nil {
			checkRouteConfig(t, s.InlineRouteConfig)
		}
	})
}

func FuzzDecodeVirtualHost(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		name, v, err := VirtualHostType.DecodeTyped(nil, &anypb.Any{TypeUrl: VirtualHostTypeURL, Value: b})
		if err != nil {
			return
		}
		if name == "" || name != v.Name || name != v.Raw().GetName() || v.VirtualHost == nil || v.VirtualHost.Name != name {
			t.Fatalf("name %q, value %q, raw %q", name, v.Name, v.Raw().GetName())
		}
		if rc := v.RouteConfigName(); !strings.HasPrefix(name, rc) || (rc != "" && name[len(rc)] != '/') {
			t.Fatalf("route config %q of %q", rc, name)
		}
		checkRouteConfig(t, &RouteConfig{Name: "vhds", VirtualHosts: []*VirtualHost{v.VirtualHost}})
	})
}

// TestSeedCorporaDecodeMore keeps the checked-in seeds of the targets above
// valid resources, as TestSeedCorporaDecode does for the others.
func TestSeedCorporaDecodeMore(t *testing.T) {
	decoders := map[string]func(b []byte) error{
		"FuzzDecodeSecret":            func(b []byte) error { return decodeErr(SecretType, SecretTypeURL, b) },
		"FuzzDecodeRuntime":           func(b []byte) error { return decodeErr(RuntimeType, RuntimeTypeURL, b) },
		"FuzzDecodeScopedRouteConfig": func(b []byte) error { return decodeErr(ScopedRouteConfigType, ScopedRouteConfigTypeURL, b) },
		"FuzzDecodeVirtualHost":       func(b []byte) error { return decodeErr(VirtualHostType, VirtualHostTypeURL, b) },
	}
	for target, decode := range decoders {
		files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
		if err != nil {
			t.Fatal(err)
		}
		seeds := 0
		for _, file := range files {
			b, err := readSeed(file)
			if err != nil {
				t.Errorf("%s: %v", file, err)
				continue
			}
			if isHex(filepath.Base(file)) {
				continue // a crasher kept by the fuzzer
			}
			seeds++
			if err := decode(b); err != nil {
				t.Errorf("%s: %v", file, err)
			}
		}
		if seeds < 3 {
			t.Errorf("%s: %d named seeds, want at least 3", target, seeds)
		}
	}
}
