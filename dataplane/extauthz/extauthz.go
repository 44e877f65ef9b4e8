package extauthz

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/goxds/xds/resources"
)

// The fixed parts of every request sent to the authorization service
// (gRFC A92): a gRPC request is an HTTP/2 POST whose size is unknown.
const (
	RequestMethod   = "POST"
	RequestSize     = -1
	RequestProtocol = "HTTP/2"
)

// FailureModeAllowedHeader is added, with the value "true", to a request
// let through because the authorization call failed and
// failure_mode_allow_header_add is set.
const FailureModeAllowedHeader = "x-envoy-auth-failure-mode-allowed"

// gRPC status codes the package fails requests with, by number: the data
// plane does not import grpc-go's codes package.
const (
	codeOK      = 0
	codeUnknown = 2
)

// Request is one request to check, as the adapter sees it.
type Request struct {
	// Path is the request's path: "/service/method" for gRPC; for plain
	// HTTP the path as sent, with its query.
	Path string
	// Headers are its headers by lower-case name (gRPC metadata), a -bin
	// header's values as raw bytes (gRPC only). Not modified.
	Headers map[string][]string
	// HTTP, when not nil, says the request is plain HTTP, not gRPC: the
	// service is told its own method, host, scheme, protocol and size
	// rather than gRPC's fixed ones, and no header is binary.
	HTTP *HTTPAttributes
	// Time is when the request started.
	Time time.Time
	// Server: the request arrived at a server, whose connection's
	// addresses and certificates follow; a client's request has none.
	Server bool
	// Local and Remote are the connection's addresses (server side).
	Local, Remote netip.AddrPort
	// PeerCertificates are the client's verified certificates, leaf
	// first (server side, TLS with a client certificate).
	PeerCertificates []*x509.Certificate
	// LocalCertificate is the server's own leaf certificate, when the
	// adapter knows it (server side, TLS).
	LocalCertificate *x509.Certificate
}

// HTTPAttributes are what a plain HTTP request tells the service beyond
// its path and headers (AttributeContext.HttpRequest), as Envoy's HTTP
// filter fills them
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/service/auth/v3/attribute_context.proto).
type HTTPAttributes struct {
	// Method, Host (the :authority), Scheme and Protocol ("HTTP/1.1",
	// "HTTP/2") of the request.
	Method, Host, Scheme, Protocol string
	// Size is the body's length; -1 when unknown.
	Size int64
}

// Peer is the source or destination of a CheckRequest
// (AttributeContext.Peer).
type Peer struct {
	// Address is the peer's address.
	Address netip.AddrPort
	// Principal is the peer's certificate's identity; "" without one.
	Principal string
	// Certificate is the peer's certificate, PEM, URL-encoded; "" unless
	// include_peer_certificate (source only).
	Certificate string
}

// HeaderValue is one header of the request sent.
type HeaderValue struct {
	Key, Value string
}

// CheckRequest is what the authorization service is sent: an
// envoy.service.auth.v3.CheckRequest's AttributeContext in the fields gRFC
// A92 sets (see the package documentation; the constant ones are
// RequestMethod, RequestSize and RequestProtocol).
type CheckRequest struct {
	// Source and Destination are set on servers only.
	Source, Destination *Peer
	// Time is the request's start.
	Time time.Time
	// Path is the request's path.
	Path string
	// Method, Host, Scheme, Protocol and Size are the HTTP request's
	// attributes: for gRPC, RequestMethod, "", "", RequestProtocol and
	// RequestSize.
	Method, Host, Scheme, Protocol string
	Size                           int64
	// HTTP: the request is plain HTTP. Its headers are also sent in the
	// string map (AttributeContext.HttpRequest.headers) that Envoy's HTTP
	// filter fills by default (encode_raw_headers unset), which
	// authorization services written for Envoy read; header_map has them
	// as for gRPC.
	HTTP bool
	// Headers is the header_map: the request's headers that the filter's
	// allowed and disallowed headers let through, sorted by name.
	Headers []HeaderValue
}

// AppendAction is a HeaderValueOption's append_action.
type AppendAction int

// The four append actions of envoy.config.core.v3.HeaderValueOption.
const (
	AppendIfExistsOrAdd AppendAction = iota
	AddIfAbsent
	OverwriteIfExistsOrAdd
	OverwriteIfExists
)

// HeaderOption is a header change the service asks for
// (HeaderValueOption). Value is the header's value: its raw_value when
// set, else its value (gRFC A102); a -bin header's raw bytes.
type HeaderOption struct {
	Key, Value string
	Action     AppendAction
	// KeepEmptyValue is the option's keep_empty_value, which gRFC A102
	// does not read: a change that leaves a header empty keeps it
	// whatever it says. Kept for the adapters that fill it.
	KeepEmptyValue bool
}

// CheckResponse is the service's answer (envoy.service.auth.v3.
// CheckResponse) in the fields gRFC A92 reads.
type CheckResponse struct {
	// Code is the status code (google.rpc.Status.code): 0 allows.
	Code int32
	// Message is the status's message, which a denial's own message
	// carries (gRFC A92).
	Message string
	// DeniedStatus is denied_response's HTTP status; 0 when unset.
	DeniedStatus int
	// DeniedHeaders are denied_response's headers, for the trailers.
	DeniedHeaders []HeaderOption
	// DeniedBody is denied_response's body, which an HTTP client answers
	// a denied request with (gRPC has no use for it).
	DeniedBody string
	// Headers and HeadersToRemove are ok_response's changes to the
	// request's headers; ResponseHeadersToAdd its changes to the response
	// headers.
	Headers              []HeaderOption
	HeadersToRemove      []string
	ResponseHeadersToAdd []HeaderOption
}

// Client calls the authorization service. The adapter makes it from the
// filter's GrpcService (gRFC A102). Check returns an error when the call
// fails (the service cannot be reached, the call times out, or it
// returns a status): the filter's failure mode then decides.
type Client interface {
	Check(ctx context.Context, req *CheckRequest) (*CheckResponse, error)
}

// FailingClient is a Client whose checks all fail with err: an adapter's
// client of a service no channel can be made to, so that the check fails
// as a failed call does, which the failure mode decides.
func FailingClient(err error) Client { return failingClient{err} }

type failingClient struct{ err error }

func (f failingClient) Check(context.Context, *CheckRequest) (*CheckResponse, error) {
	return nil, f.err
}

// Outcome is which way a check went.
type Outcome int

// The outcomes of a check, as gRFC A92's metrics count them.
const (
	// Allowed: the service allowed the request.
	Allowed Outcome = iota
	// Denied: the service denied it.
	Denied
	// Disabled: filter_enabled left the request out.
	Disabled
	// Failed: the call failed or its answer was malformed.
	Failed
)

// String names the outcome as gRFC A92's metrics do ("allowed",
// "denied", "filter_disabled", "failed"): the outcome the metrics
// interfaces of grpcxds, xdsserver and httpxds pass, as a string so that
// the recorders (metrics/otelxds, metrics/promxds) need not import this
// package.
func (o Outcome) String() string {
	switch o {
	case Allowed:
		return "allowed"
	case Denied:
		return "denied"
	case Disabled:
		return "filter_disabled"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Decision is a check's result.
type Decision struct {
	// Allow: the request goes on.
	Allow bool
	// Outcome says why.
	Outcome Outcome
	// Code and Message are the status a request that does not go on fails
	// with (Code is a gRPC status code).
	Code    uint32
	Message string
	// HTTPStatus and Body are what a plain HTTP request that does not go
	// on is answered with, as Envoy's HTTP filter answers it: the
	// denied_response's status (403 when unset) and body; status_on_error
	// (403 when unset) when the service could not decide or the filter
	// is off with deny_at_disable; 500 for a header change that
	// decoder_header_mutation_rules make an error.
	HTTPStatus int
	Body       string
	// RequestHeaders change the request's headers (apply with Apply).
	RequestHeaders []Mutation
	// ResponseHeaders change the response's headers (allowed requests).
	ResponseHeaders []Mutation
	// Trailers are the trailers of a denied request's failure.
	Trailers []Mutation
}

// Mutation is one change to a set of headers: Remove, or an
// AppendAction with Value.
type Mutation struct {
	Key, Value string
	Action     AppendAction
	Remove     bool
}

// Checker runs one external authorization filter's configuration.
type Checker struct {
	// Config is the filter's configuration for the request.
	Config *resources.ExtAuthzConfig
	// Client calls the authorization service.
	Client Client
	// Rand returns a number in [0, n), for filter_enabled; nil: math/rand.
	Rand func(n uint32) uint32
}

// Check decides req (see the package documentation). It blocks for the
// authorization call, which ends when ctx does.
func (c *Checker) Check(ctx context.Context, req *Request) Decision {
	cfg := c.Config
	if f := cfg.FilterEnabled; f.Numerator < f.Denominator {
		rnd := c.Rand
		if rnd == nil {
			rnd = rand.Uint32N
		}
		if rnd(f.Denominator) >= f.Numerator {
			if cfg.DenyAtDisable {
				return Decision{Outcome: Disabled, Code: uint32(cfg.StatusOnError), HTTPStatus: httpStatusOnError(cfg),
					Message: "ext_authz: the filter is disabled for this request and deny_at_disable is set"}
			}
			return Decision{Allow: true, Outcome: Disabled}
		}
	}
	if t := cfg.GrpcService.Timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	resp, err := c.Client.Check(ctx, BuildCheckRequest(cfg, req))
	if err != nil {
		return c.failed(fmt.Errorf("authorization call to %s failed: %w", cfg.GrpcService.TargetURI, err))
	}
	interpret := Interpret
	if req.HTTP != nil {
		interpret = InterpretHTTP // Envoy's HTTP filter's header rules
	}
	d, err := interpret(cfg, resp)
	if err != nil {
		return c.failed(err)
	}
	return d
}

// failed is the decision when the service could not decide.
func (c *Checker) failed(err error) Decision {
	cfg := c.Config
	if !cfg.FailureModeAllow {
		return Decision{Outcome: Failed, Code: uint32(cfg.StatusOnError), HTTPStatus: httpStatusOnError(cfg), Message: "ext_authz: " + err.Error()}
	}
	d := Decision{Allow: true, Outcome: Failed}
	if cfg.FailureModeAllowHeaderAdd {
		d.RequestHeaders = []Mutation{{Key: FailureModeAllowedHeader, Value: "true", Action: OverwriteIfExistsOrAdd}}
	}
	return d
}

// httpStatusOnError is status_on_error's HTTP status: 403 when unset
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/http/ext_authz/v3/ext_authz.proto).
// The configuration keeps it as a gRPC code; its message has the status.
func httpStatusOnError(cfg *resources.ExtAuthzConfig) int {
	if s := cfg.Raw.GetStatusOnError().GetCode(); s != 0 {
		return int(s)
	}
	return 403
}

// BuildCheckRequest is what the service is asked about req under cfg.
func BuildCheckRequest(cfg *resources.ExtAuthzConfig, req *Request) *CheckRequest {
	out := &CheckRequest{Time: req.Time, Path: req.Path, Method: RequestMethod, Protocol: RequestProtocol, Size: RequestSize}
	if h := req.HTTP; h != nil {
		out.Method, out.Host, out.Scheme, out.Protocol, out.Size = h.Method, h.Host, h.Scheme, h.Protocol, h.Size
		out.HTTP = true
	}
	names := make([]string, 0, len(req.Headers))
	for name := range req.Headers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !sendHeader(cfg, name) {
			continue
		}
		vs := req.Headers[name]
		if req.HTTP == nil && strings.HasSuffix(name, "-bin") {
			enc := make([]string, len(vs))
			for i, v := range vs {
				enc[i] = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			vs = enc
		}
		out.Headers = append(out.Headers, HeaderValue{Key: name, Value: strings.Join(vs, ",")})
	}
	if req.Server {
		out.Source = &Peer{Address: req.Remote}
		if len(req.PeerCertificates) > 0 {
			leaf := req.PeerCertificates[0]
			out.Source.Principal = Principal(leaf)
			if cfg.IncludePeerCertificate {
				p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})
				out.Source.Certificate = strings.ReplaceAll(url.QueryEscape(string(p)), "+", "%20")
			}
		}
		out.Destination = &Peer{Address: req.Local}
		if req.LocalCertificate != nil {
			out.Destination.Principal = Principal(req.LocalCertificate)
		}
	}
	return out
}

// sendHeader reports whether header name goes to the service: not
// matched by disallowed_headers, and matched by allowed_headers if set.
func sendHeader(cfg *resources.ExtAuthzConfig, name string) bool {
	for _, m := range cfg.DisallowedHeaders {
		if m.Match(name) {
			return false
		}
	}
	if cfg.AllowedHeaders == nil {
		return true
	}
	for _, m := range cfg.AllowedHeaders {
		if m.Match(name) {
			return true
		}
	}
	return false
}

// Principal is a certificate's identity as gRFC A92 names it: its first
// URI SAN, else its first DNS SAN, else its subject (RFC 2253).
func Principal(c *x509.Certificate) string {
	switch {
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	}
	return c.Subject.String()
}

// errMalformed marks a response the filter cannot act on.
var errMalformed = errors.New("malformed authorization response")

// Interpret turns the service's response into a decision: an error when
// the response is malformed (the caller then applies the failure mode).
// gRFC A92 (revision of 2026-05-26) with gRFC A102's header rules: every
// header change, whichever field carries it, must be valid (else the
// response is malformed) and is subject to decoder_header_mutation_rules;
// a malformed change is reported before a disallowed one.
func Interpret(cfg *resources.ExtAuthzConfig, resp *CheckResponse) (Decision, error) {
	if resp == nil {
		return Decision{}, fmt.Errorf("%w: none", errMalformed)
	}
	rules := &cfg.MutationRules
	if resp.Code != codeOK {
		// The service's own words on why in the denial's message (gRFC
		// A92: the status's text goes in the RPC's message; its code does
		// not decide it).
		d := denial(resp)
		if _, err := mutations(nil, resp.DeniedHeaders, "denied_response.headers"); err != nil {
			return Decision{}, err
		}
		if key := disallowedError(rules, resp.DeniedHeaders); key != "" {
			return disallowed(key), nil
		}
		d.Trailers, _ = mutations(rules, resp.DeniedHeaders, "denied_response.headers")
		return d, nil
	}
	// Validate every field before the rules are asked: a malformed change
	// anywhere fails the call, whatever the rules would say of the others.
	if _, err := mutations(nil, resp.Headers, "ok_response.headers"); err != nil {
		return Decision{}, err
	}
	for i, key := range resp.HeadersToRemove {
		if err := ValidHeaderName(key); err != nil {
			return Decision{}, fmt.Errorf("%w: ok_response.headers_to_remove[%d]: %v", errMalformed, i, err)
		}
	}
	if _, err := mutations(nil, resp.ResponseHeadersToAdd, "ok_response.response_headers_to_add"); err != nil {
		return Decision{}, err
	}
	if key := disallowedError(rules, resp.Headers); key != "" {
		return disallowed(key), nil
	}
	if rules.DisallowIsError {
		for _, key := range resp.HeadersToRemove {
			if !Permitted(rules, key) {
				return disallowed(key), nil
			}
		}
	}
	if key := disallowedError(rules, resp.ResponseHeadersToAdd); key != "" {
		return disallowed(key), nil
	}
	d := Decision{Allow: true, Outcome: Allowed}
	d.RequestHeaders, _ = mutations(rules, resp.Headers, "ok_response.headers")
	for _, key := range resp.HeadersToRemove {
		if Permitted(rules, key) {
			d.RequestHeaders = append(d.RequestHeaders, Mutation{Key: key, Remove: true})
		}
	}
	d.ResponseHeaders, _ = mutations(rules, resp.ResponseHeadersToAdd, "ok_response.response_headers_to_add")
	return d, nil
}

// disallowed is the failure of a request whose service asked for a header
// change the rules disallow, with disallow_is_error: Envoy's HTTP 500.
func disallowed(key string) Decision {
	return Decision{Outcome: Failed, Code: codeUnknown, HTTPStatus: 500,
		Message: fmt.Sprintf("ext_authz: the authorization service changed header %q, which decoder_header_mutation_rules disallow", key)}
}

// disallowedError returns the first header of opts the rules disallow
// when disallowed changes are errors; "" otherwise.
func disallowedError(rules *resources.HeaderMutationRules, opts []HeaderOption) string {
	if !rules.DisallowIsError {
		return ""
	}
	for _, o := range opts {
		if !Permitted(rules, o.Key) {
			return o.Key
		}
	}
	return ""
}

// mutations is Mutations for an authorization response (gRFC A92: a
// malformed change makes the response malformed).
func mutations(rules *resources.HeaderMutationRules, opts []HeaderOption, field string) ([]Mutation, error) {
	out, err := Mutations(rules, opts, field)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	return out, nil
}
