package resources

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	googledefaultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/google_default/v3"
	insecurev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/insecure/v3"
	localv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/local/v3"
	tlscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/tls/v3"
	xdscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/xds/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
)

// trustedWith is a trusted server of a bootstrap defining instances.
func trustedWith(instances ...string) *DecodeContext {
	return &DecodeContext{Bootstrap: bootstrapWith(instances...), Server: &bootstrap.ServerConfig{
		ServerURI: "trusted.example.com:443", ServerFeatures: []string{bootstrap.FeatureTrustedXDSServer},
	}}
}

func certInstance(name, cert string) *tlsv3.CommonTlsContext_CertificateProviderInstance {
	return &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: name, CertificateName: cert}
}

// grpcServiceWith is a trusted GrpcService whose channel credentials are
// plugins.
func grpcServiceWith(plugins ...*anypb.Any) *corev3.GrpcService {
	return &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{
		TargetUri: authzTarget, ChannelCredentialsPlugin: plugins,
	}}}
}

// gRFC A102: TlsCredentials and XdsCredentials are read, the first
// supported entry of the list winning; XdsCredentials on a side channel is
// its fallback.
func TestGrpcServiceTLSAndXdsCredentials(t *testing.T) {
	ctx := trustedWith("roots", "id")
	tlsCreds := toAny(&tlscredsv3.TlsCredentials{
		RootCertificateProvider:     certInstance("roots", "r"),
		IdentityCertificateProvider: certInstance("id", "i"),
	})
	// The bootstrap rides along: the channel builds the instances from it.
	wantTLS := GrpcTLSCredentials{RootInstance: "roots", RootCertName: "r", IdentityInstance: "id", IdentityCertName: "i", Bootstrap: ctx.Bootstrap}
	for _, tc := range []struct {
		name    string
		plugins []*anypb.Any
		kind    GrpcChannelCredentials
		tls     *GrpcTLSCredentials
		xds     bool
	}{
		{"tls", []*anypb.Any{toAny(&wrapperspb.StringValue{}), tlsCreds, toAny(&insecurev3.InsecureCredentials{})}, GrpcChannelTLS, &wantTLS, false},
		{"tls root only", []*anypb.Any{toAny(&tlscredsv3.TlsCredentials{RootCertificateProvider: certInstance("roots", "")})},
			GrpcChannelTLS, &GrpcTLSCredentials{RootInstance: "roots", Bootstrap: ctx.Bootstrap}, false},
		{"xds fallback tls", []*anypb.Any{toAny(&xdscredsv3.XdsCredentials{FallbackCredentials: tlsCreds})}, GrpcChannelTLS, &wantTLS, true},
		{"xds fallback insecure", []*anypb.Any{toAny(&xdscredsv3.XdsCredentials{FallbackCredentials: toAny(&insecurev3.InsecureCredentials{})}), tlsCreds},
			GrpcChannelInsecure, nil, true},
		{"google_default before tls", []*anypb.Any{toAny(&googledefaultv3.GoogleDefaultCredentials{}), tlsCreds}, GrpcChannelGoogleDefault, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := parseGrpcService(ctx, grpcServiceWith(tc.plugins...))
			if err != nil {
				t.Fatal(err)
			}
			if g.ChannelCredentials != tc.kind || g.XdsFallback != tc.xds || (g.TLS == nil) != (tc.tls == nil) || (g.TLS != nil && *g.TLS != *tc.tls) {
				t.Fatalf("got %s, TLS %v, XdsFallback %v; want %s, %v, %v", g.ChannelCredentials, g.TLS, g.XdsFallback, tc.kind, tc.tls, tc.xds)
			}
		})
	}
}

// gRFC A102 and A29: an invalid TlsCredentials or XdsCredentials entry is
// an error naming the field, even with a valid entry after it.
func TestGrpcServiceTLSAndXdsCredentialsInvalid(t *testing.T) {
	ctx := trustedWith("roots")
	insecure := toAny(&insecurev3.InsecureCredentials{})
	for _, tc := range []struct {
		name   string
		plugin *anypb.Any
		want   string
	}{
		{"no root", toAny(&tlscredsv3.TlsCredentials{}), "channel_credentials_plugin[0].root_certificate_provider: must be set"},
		{"empty root name", toAny(&tlscredsv3.TlsCredentials{RootCertificateProvider: certInstance("", "")}),
			"channel_credentials_plugin[0].root_certificate_provider.instance_name: must not be empty"},
		{"undefined root", toAny(&tlscredsv3.TlsCredentials{RootCertificateProvider: certInstance("nope", "")}),
			`root_certificate_provider.instance_name: root certificate provider instance name "nope" missing in bootstrap configuration (the bootstrap's certificate_providers defines "roots")`},
		{"unregistered plugin", toAny(&tlscredsv3.TlsCredentials{RootCertificateProvider: certInstance("unregistered", "")}),
			`root certificate provider instance name "unregistered" missing`},
		{"undefined identity", toAny(&tlscredsv3.TlsCredentials{RootCertificateProvider: certInstance("roots", ""), IdentityCertificateProvider: certInstance("id", "")}),
			`channel_credentials_plugin[0].identity_certificate_provider.instance_name: identity certificate provider instance name "id" missing`},
		{"bad tls bytes", &anypb.Any{TypeUrl: "type.googleapis.com/" + tlsCredsName, Value: []byte{0xff}}, "channel_credentials_plugin[0]: unmarshal"},
		{"no fallback", toAny(&xdscredsv3.XdsCredentials{}), "channel_credentials_plugin[0].fallback_credentials: must be set"},
		{"unsupported fallback", toAny(&xdscredsv3.XdsCredentials{FallbackCredentials: toAny(&wrapperspb.StringValue{})}),
			`channel_credentials_plugin[0].fallback_credentials: unsupported type "google.protobuf.StringValue"`},
		{"xds fallback of xds", toAny(&xdscredsv3.XdsCredentials{FallbackCredentials: toAny(&xdscredsv3.XdsCredentials{FallbackCredentials: insecure})}),
			`fallback_credentials: unsupported type "` + xdsCredsName + `"`},
		{"invalid tls fallback", toAny(&xdscredsv3.XdsCredentials{FallbackCredentials: toAny(&tlscredsv3.TlsCredentials{})}),
			"channel_credentials_plugin[0].fallback_credentials.root_certificate_provider: must be set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseGrpcService(ctx, grpcServiceWith(tc.plugin, insecure))
			checkErr(t, err, tc.want)
		})
	}
	// Through a whole resource: the path from the Listener down.
	m := extAuthzMsg(authzTarget)
	m.GetGrpcService().GetGoogleGrpc().ChannelCredentialsPlugin = []*anypb.Any{toAny(&tlscredsv3.TlsCredentials{RootCertificateProvider: certInstance("nope", "")})}
	_, _, err := decodeExtAuthz(t, ctx, m)
	checkErr(t, err, `grpc_service.google_grpc.channel_credentials_plugin[0].root_certificate_provider.instance_name: root certificate provider instance name "nope" missing`)
}

// gRFC A102 reads InsecureCredentials, GoogleDefaultCredentials,
// TlsCredentials and XdsCredentials; LocalCredentials, dropped from it
// (grpc/proposal f616fce), is a type gRPC does not read: skipped, and
// alone an error, as grpc-go v1.85 has it (internal/grpcparity
// TestGrpcServiceVerdicts).
func TestGrpcServiceLocalCredentialsNotRead(t *testing.T) {
	ctx := trustedWith()
	local := toAny(&localv3.LocalCredentials{})
	_, err := parseGrpcService(ctx, grpcServiceWith(local))
	checkErr(t, err, `channel_credentials_plugin: no supported type in ["envoy.extensions.grpc_service.channel_credentials.local.v3.LocalCredentials"]`)
	g, err := parseGrpcService(ctx, grpcServiceWith(local, toAny(&insecurev3.InsecureCredentials{})))
	if err != nil || g.ChannelCredentials != GrpcChannelInsecure {
		t.Fatalf("LocalCredentials then InsecureCredentials: %v, %v; want insecure", g, err)
	}
	_, err = parseGrpcService(ctx, grpcServiceWith(toAny(&xdscredsv3.XdsCredentials{FallbackCredentials: local})))
	checkErr(t, err, `fallback_credentials: unsupported type "envoy.extensions.grpc_service.channel_credentials.local.v3.LocalCredentials"`)
}
