package httpxds

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/dataplane/httpfilter"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
)

// The listener's HTTP filters run on the client's requests through
// dataplane/httpfilter, which grpcxds shares: which run with which
// configuration, the fault and ext_authz runtimes. What is here is the
// HTTP binding: the request as the filters see it (reqView), a denial as
// the response Envoy would answer, and the changes to the response an
// allowed request gets.

// filterEnv is what the Transport keeps for its filters across
// configurations: its count of active faults, and the channels to
// authorization services (closed by Close). The authorization service is
// called over gRPC whatever the request's transport (gRFC A92, A102's
// allowed_grpc_services as for gRPC channels). ext_authz follows Envoy's
// ExtAuthzPerRoute, as the server does (server_extauthz.go): disabled
// turns it off for the route, check_settings.context_extensions go to
// the service.
func (t *Transport) filterEnv() httpfilter.Env {
	return httpfilter.Env{Client: "an HTTP client", Faults: t.faults, Authz: (*authzClients)(&t.authz), AuthzPerRoute: true}
}

// authzClients gives the ext_authz runtime the Transport's channels to
// authorization services, with a route's context_extensions when it has
// some (httpfilter.AuthzContextClients).
type authzClients extauthzgrpc.Channels

func (c *authzClients) Client(gs *resources.GrpcService) (extauthz.Client, error) {
	return (*extauthzgrpc.Channels)(c).Client(gs)
}

func (c *authzClients) ClientWithContext(gs *resources.GrpcService, contextExtensions map[string]string) (extauthz.Client, error) {
	return (*extauthzgrpc.Channels)(c).HTTPClient(gs, extauthzgrpc.HTTPExtras{ContextExtensions: contextExtensions})
}

// AuthzRequest implements httpfilter.Request: what Envoy's ext_authz
// filter tells the service of an HTTP request
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/service/auth/v3/attribute_context.proto):
// its headers by lower-case name with the pseudo-headers :authority,
// :method and :path, the path with its query, and its method, host,
// scheme, protocol and size (-1 when unknown).
func (v *reqView) AuthzRequest() extauthz.Request {
	r := v.r
	h := make(map[string][]string, len(r.Header)+3)
	for name, vs := range r.Header {
		key := strings.ToLower(name)
		h[key] = append(h[key], vs...)
	}
	method, _ := v.Get(":method")
	path, _ := v.Get(":path")
	host := v.host()
	h[":authority"], h[":method"], h[":path"] = []string{host}, []string{method}, []string{path}
	size := r.ContentLength
	if size == 0 && r.Body != nil && r.Body != http.NoBody {
		size = -1 // net/http reads 0 with a body as unknown
	}
	proto := r.Proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	return extauthz.Request{Path: path, Headers: h, HTTP: &extauthz.HTTPAttributes{
		Method: method, Host: host, Scheme: r.URL.Scheme, Protocol: proto, Size: size}}
}

// MutateHeaders implements httpfilter.Request: the request is sent (and
// seen by later filters and hash policies) with its headers changed. The
// user's request is not modified (http.RoundTripper's contract): the view
// takes a shallow copy with headers of its own.
func (v *reqView) MutateHeaders(ms []extauthz.Mutation) {
	r := new(http.Request)
	*r = *v.r
	r.Header = v.r.Header.Clone()
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	// A new host (:authority, from a plain HTTP request's service) is
	// the request's Host, which net/http keeps outside its headers.
	ms, host, ok := extauthz.HostMutation(ms)
	if ok {
		r.Host = host
	}
	applyAuthz(r.Header, ms)
	v.r = r
}

// applyAuthz applies an authorization service's header changes (lower
// case, as the service gives them) to h, by their canonical names.
func applyAuthz(h http.Header, ms []extauthz.Mutation) {
	canon := make([]extauthz.Mutation, len(ms))
	for i, m := range ms {
		m.Key = http.CanonicalHeaderKey(m.Key)
		canon[i] = m
	}
	extauthz.Apply(h, canon)
}

// denialResponse answers a request a filter denied, as Envoy's filter
// does: a fault's abort with its status and "fault filter abort" (a gRPC
// status alone as a gRPC server's error: 200 with grpc-status), an
// authorization service's denial with denied_response's status, body and
// headers
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/service/auth/v3/external_auth.proto#service-auth-v3-deniedhttpresponse),
// status_on_error when it could not decide.
func denialResponse(req *http.Request, d *httpfilter.Denial) *http.Response {
	status := d.HTTPStatus
	var h http.Header
	if status == 0 {
		status, h = http.StatusOK, http.Header{"Grpc-Status": {strconv.FormatUint(uint64(d.Code), 10)}}
	}
	resp := localResponse(req, status, d.Body, h)
	if d.Body == "" {
		resp.Header.Del("Content-Type")
	}
	for _, m := range d.Headers {
		if http.CanonicalHeaderKey(m.Key) == "Content-Type" {
			// The service's content type is the body's.
			resp.Header.Del("Content-Type")
			break
		}
	}
	applyAuthz(resp.Header, d.Headers)
	return resp
}

// finishFilters gives the response of a request the filters let through
// what they ask of it: the response headers to add (ext_authz's
// response_headers_to_add), and the release of what they started once the
// response's body is done (at once when there is no response).
func finishFilters(res *httpfilter.Result, resp *http.Response) {
	if resp == nil {
		if res.Release != nil {
			res.Release()
		}
		return
	}
	if len(res.ResponseHeaders) > 0 {
		applyAuthz(resp.Header, res.ResponseHeaders)
	}
	if res.Release != nil {
		resp.Body = &releaseBody{ReadCloser: resp.Body, release: res.Release}
	}
}

// releaseBody releases what the filters started when the body is read to
// its end or closed, whichever comes first.
type releaseBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.release)
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
