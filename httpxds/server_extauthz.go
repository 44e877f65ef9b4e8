package httpxds

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
)

// The external authorization filter on the server, with the semantics of
// Envoy's HTTP filter
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/ext_authz_filter).
// The decision is dataplane/extauthz's, as for gRPC (gRFC A92) and the
// HTTP client: the share of requests checked, the headers sent, the
// failure mode, the header changes the service may make, and for a plain
// HTTP request its own method, host, scheme, protocol and size and the
// HTTP answer (status, headers and body). What is the server's here: the
// body with with_request_body, and ExtAuthzPerRoute honoured (disabled,
// check_settings), where gRPC ignores it.

// partialBodyHeader tells the service whether the body it is sent is
// only the first max_request_bytes of the request's (with_request_body).
const partialBodyHeader = "x-envoy-auth-partial-body"

// extAuthz runs the filter f, whose effective configuration for the
// request is cfg. It returns the writer the request goes on with (one
// that adds the service's response headers), or false when it answered
// the request itself.
func (g *generation) extAuthz(w http.ResponseWriter, req *request, f *resources.HTTPFilter, cfg resources.HTTPFilterConfig, rc *resources.RouteConfig) (http.ResponseWriter, bool) {
	var settings *extauthzv3.CheckSettings
	if pr, ok := cfg.(*resources.ExtAuthzPerRouteConfig); ok {
		// Envoy's ExtAuthzPerRoute: disabled turns the filter off for the
		// route; check_settings change what the service is sent.
		if pr.Raw.GetDisabled() {
			return w, true
		}
		settings = pr.Raw.GetCheckSettings()
	}
	c, err := resources.ExtAuthzOf(cfg, f.Parsed)
	if err != nil {
		failf(w, http.StatusInternalServerError, "HTTP filter %q: %v", f.Name, err)
		return w, false
	}
	r := req.r
	a := req.authz()
	attrs := &extauthz.HTTPAttributes{Method: r.Method, Host: r.Host, Scheme: "http", Protocol: protocolOf(r), Size: r.ContentLength}
	if r.TLS != nil {
		attrs.Scheme = "https"
	}
	ar := &extauthz.Request{Path: a.Path + a.Query, Headers: checkHeaders(req, attrs.Scheme), HTTP: attrs, Time: time.Now(),
		Server: true, Local: a.Local, Remote: a.Remote, PeerCertificates: a.PeerCertificates, LocalCertificate: servedCert(r)}
	x := extauthzgrpc.HTTPExtras{ContextExtensions: settings.GetContextExtensions()}
	if wb := bodySettings(c.Raw, settings); wb != nil {
		body, partial, err := bufferBody(r, wb.GetMaxRequestBytes())
		switch {
		case errors.Is(err, errBodyTooLarge) && !wb.GetAllowPartialMessage():
			// Envoy: 413, and the service is not asked; this takes
			// precedence over failure_mode_allow.
			failf(w, http.StatusRequestEntityTooLarge, "ext_authz: request body larger than the %d bytes with_request_body buffers", wb.GetMaxRequestBytes())
			return w, false
		case err != nil && !errors.Is(err, errBodyTooLarge):
			failf(w, http.StatusBadRequest, "ext_authz: reading the request body: %v", err)
			return w, false
		}
		x.Body, x.RawBody = body, wb.GetPackAsBytes()
		ar.Headers[partialBodyHeader] = []string{strconv.FormatBool(partial)}
	}
	client, err := g.l.s.authzChannels.HTTPClient(c.GrpcService, x)
	if err != nil {
		// No channel can be made: as a failed call.
		client = extauthz.FailingClient(fmt.Errorf("no channel to the authorization service: %w", err))
	}
	d := (&extauthz.Checker{Config: c, Client: client}).Check(r.Context(), ar)
	if m := g.l.s.opts.ExtAuthzMetrics; m != nil {
		m.ServerExtAuthz(d.Outcome.String())
	}
	if !d.Allow {
		g.deny(w, f, d, r, rc)
		return w, false
	}
	if len(d.RequestHeaders) > 0 {
		// What the service adds, the filters after and the handler see;
		// a new host (:authority) is the request's Host.
		ms, host, ok := extauthz.HostMutation(d.RequestHeaders)
		if ok {
			r.Host = host
		}
		apply(steps(ms), r.Header)
	}
	if len(d.ResponseHeaders) > 0 {
		w = &mutatingWriter{ResponseWriter: w, steps: steps(d.ResponseHeaders)}
	}
	return w, true
}

// deny answers a request the filter does not let on with the engine's
// HTTP status: a denial with the service's status (403 when it gives
// none), headers and body; a check that failed, or deny_at_disable, with
// status_on_error (403 when unset); header changes the
// decoder_header_mutation_rules disallow, with disallow_is_error, with
// 500. Why a check failed goes to the log: the caller learns only that the
// filter refused.
func (g *generation) deny(w http.ResponseWriter, f *resources.HTTPFilter, d extauthz.Decision, r *http.Request, rc *resources.RouteConfig) {
	status := d.HTTPStatus
	if status < 100 || status > 599 {
		status = http.StatusForbidden
	}
	if d.Outcome == extauthz.Denied {
		apply(steps(d.Trailers), w.Header())
		if d.Body != "" && w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "text/plain")
		}
		w.WriteHeader(status)
		io.WriteString(w, d.Body)
		return
	}
	g.l.s.logger.Warn("httpxds: ext_authz refused a request", "filter", f.Name, "status", status,
		"why", d.Message, "method", r.Method, "host", r.Host, "route_configuration", rc.Name)
	failf(w, status, "ext_authz filter %q could not authorize the request", f.Name)
}

// bodySettings is the with_request_body the request goes by: the route's
// check_settings', else the filter's, none when the route's
// disable_request_body_buffering says so.
func bodySettings(m *extauthzv3.ExtAuthz, s *extauthzv3.CheckSettings) *extauthzv3.BufferSettings {
	switch {
	case s.GetDisableRequestBodyBuffering():
		return nil
	case s.GetWithRequestBody() != nil:
		return s.GetWithRequestBody()
	}
	return m.GetWithRequestBody()
}

var errBodyTooLarge = errors.New("request body too large")

// bufferBody reads up to max bytes of r's body for the check, and puts
// them back in front of the rest for the handler. partial: the body is
// longer than max (errBodyTooLarge), and only max bytes were read.
func bufferBody(r *http.Request, max uint32) (body []byte, partial bool, err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return []byte{}, false, nil
	}
	body, err = io.ReadAll(io.LimitReader(r.Body, int64(max)+1))
	rest := r.Body
	r.Body = readCloser{io.MultiReader(bytes.NewReader(body), rest), rest}
	if err != nil {
		return nil, false, err
	}
	if len(body) > int(max) {
		return body[:max], true, errBodyTooLarge
	}
	return body, false, nil
}

// readCloser is a body read from r and closed by c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (b readCloser) Close() error { return b.c.Close() }

// checkHeaders are the request's headers as the service is sent them, by
// lower-case name, with Envoy's pseudo-headers (:authority, :method,
// :path with the query, :scheme): the names allowed_headers and
// disallowed_headers match.
func checkHeaders(req *request, scheme string) map[string][]string {
	r := req.r
	h := make(map[string][]string, len(r.Header)+5)
	for k, vs := range r.Header {
		h[strings.ToLower(k)] = vs
	}
	p, _ := req.Get(":path")
	h[":authority"] = []string{r.Host}
	h[":method"] = []string{r.Method}
	h[":path"] = []string{p}
	h[":scheme"] = []string{scheme}
	return h
}

// protocolOf is the request's protocol as Envoy names it.
func protocolOf(r *http.Request) string {
	if r.ProtoMajor == 2 {
		return "HTTP/2"
	}
	return r.Proto
}

// steps are the engine's header changes as the route mutations' steps, in
// order; names canonical, as http.Header keeps them.
func steps(ms []extauthz.Mutation) []headerStep {
	out := make([]headerStep, len(ms))
	for i, m := range ms {
		name := textproto.CanonicalMIMEHeaderKey(m.Key)
		if m.Remove {
			out[i].remove = []string{name}
			continue
		}
		// The engine turned an empty value it should not keep into a
		// removal: what is left is kept.
		out[i].add = []headerAdd{{name: name, value: m.Value, action: corev3.HeaderValueOption_HeaderAppendAction(m.Action), keepEmpty: true}}
	}
	return out
}
