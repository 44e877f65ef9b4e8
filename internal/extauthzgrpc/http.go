package extauthzgrpc

import (
	"context"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// HTTPCheck is one check of a plain HTTP request (package httpxds's
// server), which the authorization service is told of as Envoy's HTTP
// filter tells it: with the request's own method, host, scheme, protocol
// and size rather than gRPC's constant ones, the body when
// with_request_body asks for it, and the route's context_extensions. The
// data plane's engine knows nothing of these; the fields after the call
// are what the engine's Decision does not carry and an HTTP answer needs.
type HTTPCheck struct {
	// Method, Host, Scheme and Protocol ("HTTP/1.1", "HTTP/2") are the
	// request's; Size its Content-Length, -1 if unknown.
	Method, Host, Scheme, Protocol string
	Size                           int64
	// Body is the request body buffered for the check (nil: none sent);
	// RawBody sends it as raw_body (pack_as_bytes) rather than body.
	Body    []byte
	RawBody bool
	// ContextExtensions are the route's check_settings.context_extensions.
	ContextExtensions map[string]string

	// Set by the call: the service's answer, nil if the call failed, and
	// its denied_response body.
	Response   *extauthz.CheckResponse
	DeniedBody string
}

// HTTPClient returns a client of gs's service for the one check hc
// describes, on the channel Client would use.
func (c *Channels) HTTPClient(gs *resources.GrpcService, hc *HTTPCheck) (extauthz.Client, error) {
	conn, md, err := c.Conn(gs)
	if err != nil {
		return nil, err
	}
	return &httpClient{ac: authv3.NewAuthorizationClient(conn), md: md, hc: hc}, nil
}

// httpClient checks one HTTP request.
type httpClient struct {
	ac authv3.AuthorizationClient
	md metadata.MD
	hc *HTTPCheck
}

// Check implements extauthz.Client.
func (c *httpClient) Check(ctx context.Context, req *extauthz.CheckRequest) (*extauthz.CheckResponse, error) {
	out := checkRequest(req)
	hc := c.hc
	h := out.Attributes.Request.Http
	h.Method, h.Host, h.Scheme, h.Protocol, h.Size = hc.Method, hc.Host, hc.Scheme, hc.Protocol, hc.Size
	if hc.Body != nil {
		if hc.RawBody {
			h.RawBody = hc.Body
		} else {
			h.Body = string(hc.Body)
		}
	}
	out.Attributes.ContextExtensions = hc.ContextExtensions
	resp, err := c.ac.Check(metadata.NewOutgoingContext(ctx, c.md), out)
	if err != nil {
		return nil, err
	}
	hc.Response = checkResponse(resp)
	hc.DeniedBody = resp.GetDeniedResponse().GetBody()
	return hc.Response, nil
}
