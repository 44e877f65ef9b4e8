// Package extauthzgrpc binds the data plane's external authorization
// (dataplane/extauthz) to grpc-go: it makes the channel to the
// authorization service from the filter's GrpcService (gRFC A102: the
// target and credentials a trusted server gave, or the bootstrap's
// allowed_grpc_services entry for an untrusted one), and speaks
// envoy.service.auth.v3.Authorization on it. Packages grpcxds (client
// side), xdsserver (server side) and httpxds (its client and its server,
// which call the service over gRPC too) share it, each owner's channels
// in a Channels (channels.go), which closes those its configuration no
// longer names once their calls end (Channels.Name; Services, named.go,
// gathers what a configuration names). It also binds the
// filter to grpc-go's RPCs: a server's check from the RPC's peer and its
// decision on grpc-go's server API (server_rpc.go, for xdsserver), and on
// a channel the response headers a check adds (client_rpc.go, for
// grpcxds), with the grpc.Header and grpc.Trailer call-option setters
// internal/extprocgrpc uses too.
package extauthzgrpc

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// channelKey identifies a channel: its target and credentials, not the
// timeout or initial metadata, which are per call.
func channelKey(gs *resources.GrpcService) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q trusted=%v creds=%s tokens=%q", gs.TargetURI, gs.Trusted, gs.ChannelCredentials, gs.AccessTokens)
	if gs.TLS != nil {
		fmt.Fprintf(&b, " tls=%s bootstrap=%p", gs.TLS, gs.TLS.Bootstrap)
	}
	if a := gs.Allowed; a != nil {
		for _, cc := range a.ChannelCreds {
			fmt.Fprintf(&b, " channel=%s:%s", cc.Type, cc.Config)
		}
		for _, cc := range a.CallCreds {
			fmt.Fprintf(&b, " call=%s:%s", cc.Type, cc.Config)
		}
	}
	return b.String()
}

// dial makes the channel to gs's service with the credentials gRFC A102
// gives it, after extra.
func dial(gs *resources.GrpcService, extra []grpc.DialOption) (*service, error) {
	var creds *bootstrap.ChannelCredentials
	var release func()
	var err error
	switch {
	case gs.Trusted:
		creds, release, err = trustedCredentials(gs)
	case gs.Allowed != nil:
		creds, err = gs.Allowed.ChannelCredentials()
	default:
		err = fmt.Errorf("no credentials for %q: it came from an untrusted server and no bootstrap's allowed_grpc_services was known", gs.TargetURI)
	}
	if err != nil {
		return nil, fmt.Errorf("extauthzgrpc: %w", err)
	}
	// The credentials last: a later option wins, and A102's are not the
	// user's to change.
	opts := append(slices.Clip(extra), grpc.WithTransportCredentials(creds.Transport))
	if creds.PerRPC != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(creds.PerRPC))
	}
	for _, c := range creds.Call {
		opts = append(opts, grpc.WithPerRPCCredentials(c))
	}
	conn, err := grpc.NewClient(gs.TargetURI, opts...)
	if err != nil {
		creds.Close()
		if release != nil {
			release()
		}
		return nil, fmt.Errorf("extauthzgrpc: channel to %q: %w", gs.TargetURI, err)
	}
	return &service{conn: conn, creds: creds, release: release}, nil
}

// trustedCredentials builds the credentials a trusted server named, and
// what frees TlsCredentials' providers (nil for the other types).
func trustedCredentials(gs *resources.GrpcService) (*bootstrap.ChannelCredentials, func(), error) {
	var release func()
	var creds *bootstrap.ChannelCredentials
	switch gs.ChannelCredentials {
	case resources.GrpcChannelInsecure, resources.GrpcChannelGoogleDefault:
		// The bootstrap builds these two for management servers too.
		typ := bootstrap.CredsInsecure
		if gs.ChannelCredentials == resources.GrpcChannelGoogleDefault {
			typ = bootstrap.CredsGoogleDefault
		}
		var err error
		s := bootstrap.ServerConfig{ServerURI: gs.TargetURI, ChannelCreds: []bootstrap.ChannelCreds{{Type: typ}}}
		if creds, err = s.ChannelCredentials(); err != nil {
			return nil, nil, err
		}
	case resources.GrpcChannelTLS:
		tc, rel, err := tlsCredentials(gs)
		if err != nil {
			return nil, nil, err
		}
		creds, release = &bootstrap.ChannelCredentials{Transport: tc}, rel
	default:
		return nil, nil, fmt.Errorf("unsupported channel credentials %q for %q", gs.ChannelCredentials, gs.TargetURI)
	}
	for _, tok := range gs.AccessTokens {
		creds.Call = append(creds.Call, accessToken(tok))
	}
	return creds, release, nil
}

// accessToken sends "authorization: Bearer <token>", and only on a channel
// with privacy and integrity (gRFC A102): never in plaintext.
type accessToken string

func (t accessToken) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	ri, _ := credentials.RequestInfoFromContext(ctx)
	if ri.AuthInfo == nil || credentials.CheckSecurityLevel(ri.AuthInfo, credentials.PrivacyAndIntegrity) != nil {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (accessToken) RequireTransportSecurity() bool { return false }

// initialMetadata is what every call to gs's service carries: a trusted
// server's initial_metadata (an untrusted one's is dropped when decoded).
func initialMetadata(gs *resources.GrpcService) metadata.MD {
	if len(gs.InitialMetadata) == 0 {
		return metadata.MD{}
	}
	md := make(metadata.MD, len(gs.InitialMetadata))
	for _, h := range gs.InitialMetadata {
		md.Append(h.Key, h.Value)
	}
	return md
}

// client checks over one channel.
type client struct {
	ac authv3.AuthorizationClient
	md metadata.MD
}

// Check implements extauthz.Client. The call carries the service's
// initial metadata and nothing of the data-plane RPC's own outgoing
// metadata, which ctx may hold on a client.
func (c *client) Check(ctx context.Context, req *extauthz.CheckRequest) (*extauthz.CheckResponse, error) {
	ctx = metadata.NewOutgoingContext(ctx, c.md)
	resp, err := c.ac.Check(ctx, checkRequest(req))
	if err != nil {
		return nil, err
	}
	return checkResponse(resp), nil
}

// checkRequest is req as envoy.service.auth.v3.CheckRequest.
func checkRequest(req *extauthz.CheckRequest) *authv3.CheckRequest {
	headers := make([]*corev3.HeaderValue, len(req.Headers))
	for i, h := range req.Headers {
		headers[i] = &corev3.HeaderValue{Key: h.Key, RawValue: []byte(h.Value)}
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source:      peer(req.Source),
		Destination: peer(req.Destination),
		Request: &authv3.AttributeContext_Request{
			Time: timestamppb.New(req.Time),
			Http: httpRequest(req, headers),
		},
	}}
}

// httpRequest is req's HTTP attributes: gRPC's fixed ones for a request
// that left Method empty (one not built by extauthz.BuildCheckRequest).
func httpRequest(req *extauthz.CheckRequest, headers []*corev3.HeaderValue) *authv3.AttributeContext_HttpRequest {
	out := &authv3.AttributeContext_HttpRequest{
		Method:    req.Method,
		HeaderMap: &corev3.HeaderMap{Headers: headers},
		Path:      req.Path,
		Host:      req.Host,
		Scheme:    req.Scheme,
		Size:      req.Size,
		Protocol:  req.Protocol,
	}
	if out.Method == "" {
		out.Method, out.Size, out.Protocol = extauthz.RequestMethod, extauthz.RequestSize, extauthz.RequestProtocol
	}
	if req.HTTP && len(req.Headers) > 0 {
		out.Headers = make(map[string]string, len(req.Headers))
		for _, h := range req.Headers {
			out.Headers[h.Key] = h.Value
		}
	}
	return out
}

func peer(p *extauthz.Peer) *authv3.AttributeContext_Peer {
	if p == nil {
		return nil
	}
	out := &authv3.AttributeContext_Peer{Principal: p.Principal, Certificate: p.Certificate}
	if p.Address.IsValid() {
		out.Address = &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address:       p.Address.Addr().Unmap().String(),
			PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(p.Address.Port())},
		}}}
	}
	return out
}

// checkResponse is resp in the data plane's terms.
func checkResponse(resp *authv3.CheckResponse) *extauthz.CheckResponse {
	out := &extauthz.CheckResponse{Code: resp.GetStatus().GetCode(), Message: resp.GetStatus().GetMessage()}
	if d := resp.GetDeniedResponse(); d != nil {
		out.DeniedStatus = int(d.GetStatus().GetCode())
		out.DeniedHeaders = headerOptions(d.GetHeaders())
		out.DeniedBody = d.GetBody()
	}
	if ok := resp.GetOkResponse(); ok != nil {
		out.Headers = headerOptions(ok.GetHeaders())
		out.HeadersToRemove = ok.GetHeadersToRemove()
		out.ResponseHeadersToAdd = headerOptions(ok.GetResponseHeadersToAdd())
	}
	return out
}

// headerOptions converts HeaderValueOptions: a header's value is its
// raw_value when set, else its legacy value (gRFC A102, for every header,
// -bin or not); the deprecated append is not read. A missing header
// becomes an empty name, which the data plane rejects as malformed.
func headerOptions(in []*corev3.HeaderValueOption) []extauthz.HeaderOption {
	if len(in) == 0 {
		return nil
	}
	out := make([]extauthz.HeaderOption, len(in))
	for i, o := range in {
		h := o.GetHeader()
		v := h.GetValue()
		if raw := h.GetRawValue(); len(raw) > 0 {
			v = string(raw)
		}
		out[i] = extauthz.HeaderOption{
			Key:            h.GetKey(),
			Value:          v,
			Action:         extauthz.AppendAction(o.GetAppendAction()),
			KeepEmptyValue: o.GetKeepEmptyValue(),
		}
	}
	return out
}

// Mutations applies ms to a copy of md (nil for none) and returns it.
func Mutations(md metadata.MD, ms []extauthz.Mutation) metadata.MD {
	out := md.Copy()
	if out == nil {
		out = metadata.MD{}
	}
	extauthz.Apply(out, ms)
	return out
}
