package extauthzgrpc

import (
	"context"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// HTTPExtras are what an HTTP server's check (package httpxds) tells the
// service beyond the data plane's CheckRequest, as Envoy's HTTP filter
// tells it: the body when with_request_body asks for it, and the route's
// check_settings.context_extensions.
type HTTPExtras struct {
	// Body is the request body buffered for the check (nil: none sent);
	// RawBody sends it as raw_body (pack_as_bytes) rather than body.
	Body    []byte
	RawBody bool
	// ContextExtensions are the route's check_settings.context_extensions.
	ContextExtensions map[string]string
}

// HTTPClient returns a client of gs's service, on the channel Client
// would use, whose checks carry x.
func (c *Channels) HTTPClient(gs *resources.GrpcService, x HTTPExtras) (extauthz.Client, error) {
	conn, md, err := c.Conn(gs)
	if err != nil {
		return nil, err
	}
	return &httpClient{ac: authv3.NewAuthorizationClient(conn), md: md, x: x}, nil
}

// httpClient checks HTTP requests with extras.
type httpClient struct {
	ac authv3.AuthorizationClient
	md metadata.MD
	x  HTTPExtras
}

// Check implements extauthz.Client.
func (c *httpClient) Check(ctx context.Context, req *extauthz.CheckRequest) (*extauthz.CheckResponse, error) {
	out := checkRequest(req)
	if c.x.Body != nil {
		if h := out.Attributes.Request.Http; c.x.RawBody {
			h.RawBody = c.x.Body
		} else {
			h.Body = string(c.x.Body)
		}
	}
	out.Attributes.ContextExtensions = c.x.ContextExtensions
	resp, err := c.ac.Check(metadata.NewOutgoingContext(ctx, c.md), out)
	if err != nil {
		return nil, err
	}
	return checkResponse(resp), nil
}
