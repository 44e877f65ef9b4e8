package resources

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// decodeMetadata decodes an ExtAuthz Listener whose GrpcService carries md
// as its initial_metadata, from the server of ctx.
func decodeMetadata(t *testing.T, ctx *DecodeContext, md ...*corev3.HeaderValue) (*GrpcService, error) {
	t.Helper()
	m := extAuthzMsg(authzTarget)
	m.GetGrpcService().InitialMetadata = md
	c, _, err := decodeExtAuthz(t, ctx, m)
	if err != nil {
		return nil, err
	}
	return c.GrpcService, nil
}

// gRFC A102's HeaderValue, as a GrpcService's initial_metadata reads it
// from a trusted server: raw_value when set, else value, for every header
// (not only -bin ones); a -bin header's bytes as they are; an empty value
// kept; a name or value of up to 16384 bytes accepted.
func TestGrpcServiceInitialMetadataRead(t *testing.T) {
	trusted, _ := authzContexts()
	long := strings.Repeat("v", 16384)
	longKey := strings.Repeat("k", 16384)
	for _, tc := range []struct {
		name string
		h    *corev3.HeaderValue
		want HeaderValue
	}{
		{"raw_value of a text header", &corev3.HeaderValue{Key: "x-tenant", RawValue: []byte("blue")}, HeaderValue{"x-tenant", "blue"}},
		{"raw_value before value", &corev3.HeaderValue{Key: "x-tenant", Value: "legacy", RawValue: []byte("raw")}, HeaderValue{"x-tenant", "raw"}},
		{"value when raw_value is unset", &corev3.HeaderValue{Key: "x-tenant", Value: "blue"}, HeaderValue{"x-tenant", "blue"}},
		{"value not read when raw_value is set", &corev3.HeaderValue{Key: "x-tenant", Value: "a\nb", RawValue: []byte("ok")}, HeaderValue{"x-tenant", "ok"}},
		{"-bin raw_value as raw bytes", &corev3.HeaderValue{Key: "x-id-bin", RawValue: []byte{0, 0xff, '\n'}}, HeaderValue{"x-id-bin", "\x00\xff\n"}},
		{"-bin value", &corev3.HeaderValue{Key: "x-id-bin", Value: "\x01\x02"}, HeaderValue{"x-id-bin", "\x01\x02"}},
		{"empty value", &corev3.HeaderValue{Key: "x-empty"}, HeaderValue{"x-empty", ""}},
		{"raw_value of 16384 bytes", &corev3.HeaderValue{Key: "x-long", RawValue: []byte(long)}, HeaderValue{"x-long", long}},
		{"value of 16384 bytes", &corev3.HeaderValue{Key: "x-long", Value: long}, HeaderValue{"x-long", long}},
		{"name of 16384 bytes", &corev3.HeaderValue{Key: longKey, Value: "v"}, HeaderValue{longKey, "v"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := decodeMetadata(t, trusted, tc.h)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.InitialMetadata) != 1 || g.InitialMetadata[0] != tc.want {
				t.Fatalf("initial metadata %s, want [%s]", shortHeaders(g.InitialMetadata...), shortHeaders(tc.want))
			}
		})
	}
	// Order and repeated names are kept.
	g, err := decodeMetadata(t, trusted, &corev3.HeaderValue{Key: "x-a", RawValue: []byte("1")},
		&corev3.HeaderValue{Key: "x-b", Value: "2"}, &corev3.HeaderValue{Key: "x-a", RawValue: []byte("3")})
	if err != nil {
		t.Fatal(err)
	}
	if want := []HeaderValue{{"x-a", "1"}, {"x-b", "2"}, {"x-a", "3"}}; !slices.Equal(g.InitialMetadata, want) {
		t.Fatalf("initial metadata %q, want %q", g.InitialMetadata, want)
	}
}

// shortHeaders prints hs with long names and values cut short.
func shortHeaders(hs ...HeaderValue) string {
	var b strings.Builder
	for i, h := range hs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%q: %q (%d bytes)", truncate(h.Key), truncate(h.Value), len(h.Value))
	}
	return b.String()
}

// gRFC A102's rules for a HeaderValue in a resource, each making the
// resource invalid with an error naming the entry and the field read:
// the name (empty, upper case, host, a pseudo-header, grpc-, not a gRPC
// header name, over 16384 bytes) and the value read (raw_value when set,
// else value: over 16384 bytes, or not printable ASCII for a header that
// is not -bin). The GrpcService is validated whoever sent it: an
// untrusted server's initial_metadata is ignored once valid, not exempt
// from validation (A102: a field that fails validation makes the
// resource invalid).
func TestGrpcServiceInitialMetadataInvalid(t *testing.T) {
	trusted, untrusted := authzContexts()
	over := strings.Repeat("v", 16385)
	for _, tc := range []struct {
		name string
		h    *corev3.HeaderValue
		want string
	}{
		{"empty name", &corev3.HeaderValue{Value: "v"}, `initial_metadata[1].key: "": must not be empty`},
		{"upper case name", &corev3.HeaderValue{Key: "X-Tenant", Value: "v"}, `initial_metadata[1].key: "X-Tenant": byte 0x58 at 0 is not allowed`},
		{"host", &corev3.HeaderValue{Key: "host", Value: "v"}, `initial_metadata[1].key: "host": a pseudo-header or host cannot be set`},
		{"pseudo-header", &corev3.HeaderValue{Key: ":authority", Value: "v"}, `initial_metadata[1].key: ":authority": a pseudo-header or host cannot be set`},
		{"grpc- name", &corev3.HeaderValue{Key: "grpc-timeout", Value: "1S"}, `initial_metadata[1].key: "grpc-timeout": grpc- headers are gRPC's own`},
		{"not a gRPC header name", &corev3.HeaderValue{Key: "x y", Value: "v"}, `initial_metadata[1].key: "x y": byte 0x20 at 1 is not allowed`},
		{"name over 16384 bytes", &corev3.HeaderValue{Key: strings.Repeat("k", 16385), Value: "v"}, "initial_metadata[1].key: \"kkkk"},
		{"raw_value not printable", &corev3.HeaderValue{Key: "x-tenant", Value: "ok", RawValue: []byte("a\nb")}, `initial_metadata[1].raw_value: byte 0xa at 1 is not printable ASCII (key "x-tenant")`},
		{"raw_value not ASCII", &corev3.HeaderValue{Key: "x-tenant", RawValue: []byte{0xff}}, `initial_metadata[1].raw_value: byte 0xff at 0`},
		{"value not printable", &corev3.HeaderValue{Key: "x-tenant", Value: "a\tb"}, `initial_metadata[1].value: byte 0x9 at 1 is not printable ASCII (key "x-tenant")`},
		{"raw_value over 16384 bytes", &corev3.HeaderValue{Key: "x-long", RawValue: []byte(over)}, "initial_metadata[1].raw_value: longer than 16384 bytes"},
		{"value over 16384 bytes", &corev3.HeaderValue{Key: "x-long", Value: over}, "initial_metadata[1].value: longer than 16384 bytes"},
		{"-bin raw_value over 16384 bytes", &corev3.HeaderValue{Key: "x-id-bin", RawValue: []byte(over)}, "initial_metadata[1].raw_value: longer than 16384 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok := &corev3.HeaderValue{Key: "x-ok", Value: "v"}
			_, err := decodeMetadata(t, trusted, ok, tc.h)
			checkErr(t, err, "grpc_service."+tc.want)
			_, err = decodeMetadata(t, untrusted, ok, tc.h)
			checkErr(t, err, "grpc_service."+tc.want)
		})
	}
}

// gRFC A102 as issue 27 reads it: a GrpcService from a server not marked
// trusted_xds_server gets none of its initial_metadata, raw_value or
// value, -bin or not; its credentials are the bootstrap's.
func TestGrpcServiceInitialMetadataIgnoredFromUntrustedServer(t *testing.T) {
	_, untrusted := authzContexts()
	g, err := decodeMetadata(t, untrusted, &corev3.HeaderValue{Key: "x-tenant", RawValue: []byte("blue")},
		&corev3.HeaderValue{Key: "x-id-bin", RawValue: []byte{0xff}}, &corev3.HeaderValue{Key: "x-legacy", Value: "v"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Trusted || g.InitialMetadata != nil || g.Allowed == nil {
		t.Fatalf("from an untrusted server: trusted %v, initial metadata %q, allowed %v", g.Trusted, g.InitialMetadata, g.Allowed)
	}
}
