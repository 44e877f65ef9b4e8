package resources

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesstokenv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/call_credentials/access_token/v3"
	googledefaultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/google_default/v3"
	insecurev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/insecure/v3"
	tlscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/tls/v3"
	xdscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/xds/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc/resolver"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
)

// GrpcService is a validated envoy.config.core.v3.GrpcService: how to reach
// a side-channel service (an external authorization server) that a
// filter's configuration names, as gRFC A102 says gRPC reads one.
//
// Only google_grpc is supported. Whether the rest of the message is
// believed depends on the server that sent it: from a server marked
// trusted_xds_server (bootstrap.FeatureTrustedXDSServer) the target,
// credentials and initial metadata are used as given; from any other the
// target must be a key of the bootstrap's allowed_grpc_services (else the
// resource is invalid), the credentials are that entry's, and
// initial_metadata is ignored, so that a management server cannot send
// the client, or its tokens, where the client's owner did not allow.
type GrpcService struct {
	// TargetURI is the gRPC target of the service, as given.
	TargetURI string
	// Timeout is the deadline of each call to the service; 0 for none.
	Timeout time.Duration
	// Trusted: the sending server is marked trusted_xds_server, and
	// ChannelCredentials, AccessTokens and InitialMetadata come from the
	// message. Otherwise they are empty and Allowed gives the credentials.
	Trusted bool
	// ChannelCredentials is the first supported channel_credentials_plugin
	// entry (trusted servers only); for an XdsCredentials entry, its
	// fallback_credentials' type (see XdsFallback).
	ChannelCredentials GrpcChannelCredentials
	// TLS is the TlsCredentials entry's certificate provider instances,
	// set when ChannelCredentials is GrpcChannelTLS.
	TLS *GrpcTLSCredentials
	// XdsFallback: the entry chosen was XdsCredentials, and
	// ChannelCredentials (and TLS) are its fallback_credentials. A side
	// channel has no xDS security configuration of its own (no cluster
	// sends it one), so XdsCredentials always fall back there (gRFC A102).
	XdsFallback bool
	// AccessTokens are the tokens of the call_credentials_plugin
	// AccessTokenCredentials entries, in order (trusted servers only):
	// each is sent as "authorization: Bearer <token>", and only on a
	// channel with privacy and integrity.
	AccessTokens []string
	// InitialMetadata is added to every call to the service (trusted
	// servers only).
	InitialMetadata []HeaderValue
	// Allowed is the bootstrap's allowed_grpc_services entry for
	// TargetURI, whose credentials are used (untrusted servers only). Nil
	// from an untrusted server only when the decoder knew no bootstrap
	// (DecodeContext.Bootstrap), and then no channel can be made.
	Allowed *bootstrap.AllowedGRPCService
	// Raw is the message as received.
	Raw *corev3.GrpcService
}

// GrpcChannelCredentials names a supported channel credentials plugin of a
// GrpcService (gRFC A102).
type GrpcChannelCredentials string

// The channel credentials plugins goxds reads. XdsCredentials has no
// value of its own: it is read as its fallback (GrpcService.XdsFallback).
const (
	GrpcChannelInsecure      GrpcChannelCredentials = "insecure"
	GrpcChannelGoogleDefault GrpcChannelCredentials = "google_default"
	GrpcChannelTLS           GrpcChannelCredentials = "tls"
	// LocalCredentials is not read: gRFC A102 dropped it (grpc/proposal
	// f616fce), so the decoder skips that type as any it does not know.
)

// GrpcTLSCredentials is a TlsCredentials plugin: certificate provider
// instances of the bootstrap's certificate_providers, checked against the
// bootstrap as a CommonTlsContext's are (gRFC A29).
type GrpcTLSCredentials struct {
	// RootInstance and RootCertName verify the server (required).
	RootInstance, RootCertName string
	// IdentityInstance and IdentityCertName give the client's certificate
	// for mutual TLS; empty for none.
	IdentityInstance, IdentityCertName string
	// Bootstrap is the bootstrap of the decoding client, whose
	// certificate_providers the channel builds the instances from: the
	// resource names them, the bootstrap defines them. Nil when decoded
	// outside a client, and then no channel can be made.
	Bootstrap *bootstrap.Config
}

// String names the instances, for channel keys and logs.
func (t *GrpcTLSCredentials) String() string {
	if t == nil {
		return "<nil>"
	}
	return fmt.Sprintf("root %q/%q identity %q/%q", t.RootInstance, t.RootCertName, t.IdentityInstance, t.IdentityCertName)
}

// HeaderValue is one header to add to calls.
type HeaderValue struct {
	Key, Value string
}

// String describes the service for logs and errors, without tokens or
// header values.
func (g *GrpcService) String() string {
	if g == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "target %q", g.TargetURI)
	if g.Timeout > 0 {
		fmt.Fprintf(&b, ", timeout %v", g.Timeout)
	}
	if g.Trusted {
		creds := string(g.ChannelCredentials)
		if g.TLS != nil {
			creds += " (" + g.TLS.String() + ")"
		}
		if g.XdsFallback {
			creds = "xds, fallback " + creds
		}
		fmt.Fprintf(&b, ", trusted, channel credentials %s, %d access token(s), %d initial metadata", creds, len(g.AccessTokens), len(g.InitialMetadata))
	} else {
		b.WriteString(", credentials from allowed_grpc_services")
	}
	return b.String()
}

// The longest header name and value gRFC A102 accepts ("invalid if the
// length exceeds 16384"), as Envoy's HeaderValue's max_bytes.
const (
	maxHeaderKeyLen   = 16384
	maxHeaderValueLen = 16384
)

// parseGrpcService validates a GrpcService under gRFC A102's trust rule
// for the server in ctx (none known: untrusted). From an untrusted server
// a target the bootstrap does not allow is an error naming it; the check
// is left out only when no bootstrap is known (a resource decoded outside
// a client), as the other bootstrap checks are. initial_metadata is
// validated from any server and used only from a trusted one.
func parseGrpcService(ctx *DecodeContext, m *corev3.GrpcService) (*GrpcService, error) {
	gg := m.GetGoogleGrpc()
	if gg == nil {
		if m.GetEnvoyGrpc() != nil {
			return nil, fieldErrorf("envoy_grpc", "not supported (gRPC reaches side-channel services by google_grpc target_uri)")
		}
		return nil, fieldErrorf("google_grpc", "must be set")
	}
	target := gg.GetTargetUri()
	if err := validateTargetURI(target); err != nil {
		return nil, at("google_grpc.target_uri", err)
	}
	g := &GrpcService{TargetURI: target, Raw: m}
	if d := m.GetTimeout(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, fieldErrorf("timeout", "%v", err)
		}
		if g.Timeout = d.AsDuration(); g.Timeout <= 0 {
			return nil, fieldErrorf("timeout", "must be positive, got %v", g.Timeout)
		}
	}
	// gRFC A102 validates initial_metadata as part of the GrpcService
	// whoever sent it (an invalid field makes the resource invalid);
	// trust decides only whether it is used.
	md, err := initialMetadata(m.GetInitialMetadata())
	if err != nil {
		return nil, err
	}
	srv := ctx.server()
	if srv != nil && srv.TrustedXDSServer() {
		g.Trusted, g.InitialMetadata = true, md
		cc, err := channelCredentialsPlugin(ctx, gg.GetChannelCredentialsPlugin())
		if err != nil {
			return nil, at("google_grpc.channel_credentials_plugin", err)
		}
		g.ChannelCredentials, g.TLS, g.XdsFallback = cc.kind, cc.tls, cc.xds
		if g.AccessTokens, err = callCredentialsPlugin(gg.GetCallCredentialsPlugin()); err != nil {
			return nil, at("google_grpc.call_credentials_plugin", err)
		}
		return g, nil
	}
	if ctx == nil || ctx.Bootstrap == nil {
		return g, nil
	}
	a, ok := ctx.Bootstrap.AllowedGRPCService(target)
	if !ok {
		from := "a server"
		if srv != nil {
			from = fmt.Sprintf("server %q", srv.ServerURI)
		}
		return nil, fieldErrorf("google_grpc.target_uri", "%q is not in the bootstrap's allowed_grpc_services, which %s not marked %s must name (gRFC A102)",
			target, from, bootstrap.FeatureTrustedXDSServer)
	}
	g.Allowed = &a
	return g, nil
}

// validateTargetURI checks target as grpc.NewClient would read it: a URI
// whose scheme has a registered resolver, or else a target for the
// default scheme.
func validateTargetURI(target string) error {
	if target == "" {
		return errors.New("must not be empty")
	}
	if u, err := url.Parse(target); err == nil && u.Scheme != "" && resolver.Get(u.Scheme) != nil {
		return nil
	}
	if _, err := url.Parse("dns:///" + target); err != nil {
		return fmt.Errorf("%q is not a valid gRPC target: %v", target, err)
	}
	return nil
}

// The full names of the credential plugins goxds reads.
const (
	insecureCredsName      = "envoy.extensions.grpc_service.channel_credentials.insecure.v3.InsecureCredentials"
	googleDefaultCredsName = "envoy.extensions.grpc_service.channel_credentials.google_default.v3.GoogleDefaultCredentials"
	tlsCredsName           = "envoy.extensions.grpc_service.channel_credentials.tls.v3.TlsCredentials"
	xdsCredsName           = "envoy.extensions.grpc_service.channel_credentials.xds.v3.XdsCredentials"
	accessTokenCredsName   = "envoy.extensions.grpc_service.call_credentials.access_token.v3.AccessTokenCredentials"
)

// channelCreds is a channel_credentials_plugin entry as read.
type channelCreds struct {
	kind GrpcChannelCredentials
	tls  *GrpcTLSCredentials
	xds  bool
}

// channelCredentialsPlugin picks the first entry of a supported type; none
// is an error, as is a supported entry that is invalid.
func channelCredentialsPlugin(ctx *DecodeContext, list []*anypb.Any) (channelCreds, error) {
	for i, a := range list {
		cc, ok, err := channelCredential(ctx, a, true)
		if err != nil {
			return channelCreds{}, at(index("", i), err)
		}
		if ok {
			return cc, nil
		}
	}
	types := make([]string, len(list))
	for i, a := range list {
		types[i] = messageName(a.GetTypeUrl())
	}
	return channelCreds{}, fmt.Errorf("no supported type in %q (supported: InsecureCredentials, GoogleDefaultCredentials, TlsCredentials, XdsCredentials)", types)
}

// channelCredential reads one entry; ok is false for a type goxds does not
// read. XdsCredentials is read only where withXds (not as its own
// fallback, which would have nothing to fall back to).
func channelCredential(ctx *DecodeContext, a *anypb.Any, withXds bool) (cc channelCreds, ok bool, err error) {
	name := messageName(a.GetTypeUrl())
	var m proto.Message
	switch name {
	case insecureCredsName:
		cc.kind, m = GrpcChannelInsecure, new(insecurev3.InsecureCredentials)
	case googleDefaultCredsName:
		cc.kind, m = GrpcChannelGoogleDefault, new(googledefaultv3.GoogleDefaultCredentials)
	case tlsCredsName:
		cc.kind, m = GrpcChannelTLS, new(tlscredsv3.TlsCredentials)
	case xdsCredsName:
		if !withXds {
			return cc, false, nil
		}
		m = new(xdscredsv3.XdsCredentials)
	default:
		return cc, false, nil
	}
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		return cc, false, fmt.Errorf("unmarshal %s: %v", name, err)
	}
	switch m := m.(type) {
	case *tlscredsv3.TlsCredentials:
		if cc.tls, err = tlsCredentials(ctx, m); err != nil {
			return cc, false, err
		}
	case *xdscredsv3.XdsCredentials:
		fb := m.GetFallbackCredentials()
		if fb == nil {
			return cc, false, fieldErrorf("fallback_credentials", "must be set")
		}
		cc, ok, err = channelCredential(ctx, fb, false)
		if err != nil {
			return cc, false, at("fallback_credentials", err)
		}
		if !ok {
			return cc, false, fieldErrorf("fallback_credentials", "unsupported type %q (supported: InsecureCredentials, GoogleDefaultCredentials, TlsCredentials)", messageName(fb.GetTypeUrl()))
		}
		cc.xds = true
	}
	return cc, true, nil
}

// tlsCredentials validates a TlsCredentials plugin: a root provider
// instance is required, an identity one optional, and each must be one
// the bootstrap defines (when a bootstrap is known), as gRFC A29 checks a
// CommonTlsContext's: a channel naming any other could never handshake.
func tlsCredentials(ctx *DecodeContext, m *tlscredsv3.TlsCredentials) (*GrpcTLSCredentials, error) {
	root := m.GetRootCertificateProvider()
	if root == nil {
		return nil, fieldErrorf("root_certificate_provider", "must be set")
	}
	t := &GrpcTLSCredentials{RootInstance: root.GetInstanceName(), RootCertName: root.GetCertificateName()}
	if ctx != nil {
		t.Bootstrap = ctx.Bootstrap
	}
	if err := providerInstance(ctx, "root", root); err != nil {
		return nil, at("root_certificate_provider", err)
	}
	if id := m.GetIdentityCertificateProvider(); id != nil {
		if err := providerInstance(ctx, "identity", id); err != nil {
			return nil, at("identity_certificate_provider", err)
		}
		t.IdentityInstance, t.IdentityCertName = id.GetInstanceName(), id.GetCertificateName()
	}
	return t, nil
}

// providerInstance checks one certificate provider reference.
func providerInstance(ctx *DecodeContext, kind string, p *tlsv3.CommonTlsContext_CertificateProviderInstance) error {
	name := p.GetInstanceName()
	if name == "" {
		return fieldErrorf("instance_name", "must not be empty")
	}
	if ctx == nil || ctx.Bootstrap == nil || ctx.Bootstrap.HasCertificateProvider(name) {
		return nil
	}
	return fieldErrorf("instance_name", "%s certificate provider instance name %q missing in bootstrap configuration (%s)",
		kind, name, definedProviders(ctx.Bootstrap))
}

// callCredentialsPlugin reads every supported entry; unsupported ones are
// skipped, and none at all is fine: call credentials are optional.
func callCredentialsPlugin(list []*anypb.Any) ([]string, error) {
	var tokens []string
	for i, a := range list {
		if messageName(a.GetTypeUrl()) != accessTokenCredsName {
			continue
		}
		m := new(accesstokenv3.AccessTokenCredentials)
		if err := proto.Unmarshal(a.GetValue(), m); err != nil {
			return nil, fmt.Errorf("[%d]: unmarshal AccessTokenCredentials: %v", i, err)
		}
		if m.GetToken() == "" {
			return nil, fieldErrorf(index("", i)+".token", "must not be empty")
		}
		tokens = append(tokens, m.GetToken())
	}
	return tokens, nil
}

// initialMetadata validates the headers to add to calls as gRFC A102
// reads a HeaderValue: a name gRPC can send (lower case, not a
// pseudo-header, not host, not grpc-), and as the value raw_value when it
// is set, else the legacy value, for every header (not only -bin ones).
// The value read is at most 16384 bytes and, unless the header is binary
// (-bin, whose raw_value is its bytes as they are), printable ASCII;
// errors name the field the value came from.
func initialMetadata(in []*corev3.HeaderValue) ([]HeaderValue, error) {
	var out []HeaderValue
	for i, h := range in {
		path := index("initial_metadata", i)
		key := h.GetKey()
		if err := validMetadataKey(key); err != nil {
			return nil, fieldErrorf(path+".key", "%q: %v", truncate(key), err)
		}
		v, field := h.GetValue(), ".value"
		// raw_value is proto3 bytes, whose unset is empty: an empty
		// raw_value leaves the legacy value to be read.
		if raw := h.GetRawValue(); len(raw) > 0 {
			v, field = string(raw), ".raw_value"
		}
		if len(v) > maxHeaderValueLen {
			return nil, fieldErrorf(path+field, "longer than %d bytes", maxHeaderValueLen)
		}
		if !strings.HasSuffix(key, "-bin") {
			for j := 0; j < len(v); j++ {
				if v[j] < 0x20 || v[j] > 0x7e {
					return nil, fieldErrorf(path+field, "byte %#x at %d is not printable ASCII (key %q)", v[j], j, truncate(key))
				}
			}
		}
		out = append(out, HeaderValue{Key: key, Value: v})
	}
	return out, nil
}

// validMetadataKey is gRPC's rule for a header name it may send.
func validMetadataKey(key string) error {
	switch {
	case key == "":
		return errors.New("must not be empty")
	case len(key) > maxHeaderKeyLen:
		return fmt.Errorf("longer than %d bytes", maxHeaderKeyLen)
	case key == "host" || strings.HasPrefix(key, ":"):
		return errors.New("a pseudo-header or host cannot be set")
	case strings.HasPrefix(key, "grpc-"):
		return errors.New("grpc- headers are gRPC's own")
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("byte %#x at %d is not allowed (lower-case letters, digits, '-', '_', '.')", c, i)
		}
	}
	return nil
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
