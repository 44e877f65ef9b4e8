package extauthz

import (
	"fmt"
	"strings"

	"github.com/goxds/xds/resources"
)

// A plain HTTP request's header changes follow Envoy's ext_authz HTTP
// filter, not gRFC A102's rules for gRPC (Interpret): the ExtAuthz
// proto's decoder_header_mutation_rules and validate_mutations
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/http/ext_authz/v3/ext_authz.proto)
// and HeaderMutationRules' defaults
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/common/mutation_rules/v3/mutation_rules.proto).
//
//   - Names are lower-cased, as Envoy keeps them; grpc-* is a header
//     like any other, and a value may hold any byte but NUL, CR, LF and
//     the other controls but tab (which net/http cannot carry either).
//   - validate_mutations: an invalid name or value in any field fails the
//     request with 500, failure_mode_allow or not; without it the change
//     is left out (Envoy would pass it on unchecked, which net/http
//     cannot). An invalid name to remove changes nothing and fails nothing.
//   - The request's pseudo-headers and host are never removed. Without
//     decoder_header_mutation_rules nothing else is refused; with them, a
//     change to the request's headers (ok_response's headers and
//     headers_to_remove) is checked as Envoy's rules check it:
//     disallow_all, then disallow_expression refuse; a name
//     allow_expression matches is allowed; then host and the routing
//     pseudo-headers (:authority, :method, :scheme) need
//     allow_all_routing, any pseudo-header is refused by disallow_system,
//     and x-envoy* needs allow_envoy. A refused change is ignored, or
//     with disallow_is_error fails the request with 500. The response's
//     headers (response_headers_to_add, denied_response's) are not
//     checked by the rules, which are the request's.
//   - Of the pseudo-headers only :authority (as host) is applied: the
//     request's Host (HostMutation); net/http keeps the path, method and
//     scheme outside its headers, and a change to them is left out.

// InterpretHTTP is Interpret for a plain HTTP request (Request.HTTP set),
// by Envoy's HTTP filter's header rules (see above).
func InterpretHTTP(cfg *resources.ExtAuthzConfig, resp *CheckResponse) (Decision, error) {
	if resp == nil {
		return Decision{}, fmt.Errorf("%w: none", errMalformed)
	}
	h := httpRules{cfg: cfg, validate: cfg.Raw.GetValidateMutations()}
	if resp.Code != codeOK {
		d := denial(resp)
		var bad string
		if d.Trailers, bad = h.options(resp.DeniedHeaders, "denied_response.headers", false); bad != "" {
			return h.invalid(bad), nil
		}
		return d, h.err
	}
	d := Decision{Allow: true, Outcome: Allowed}
	var bad string
	if d.RequestHeaders, bad = h.options(resp.Headers, "ok_response.headers", true); bad != "" {
		return h.invalid(bad), nil
	}
	if h.refused != "" {
		return disallowed(h.refused), nil
	}
	for _, key := range resp.HeadersToRemove {
		key = strings.ToLower(key)
		if validHTTPName(key) != nil || key == "host" || strings.HasPrefix(key, ":") {
			continue
		}
		if !h.allowed(key) {
			if h.refused != "" {
				return disallowed(key), nil
			}
			continue
		}
		d.RequestHeaders = append(d.RequestHeaders, Mutation{Key: key, Remove: true})
	}
	if d.ResponseHeaders, bad = h.options(resp.ResponseHeadersToAdd, "ok_response.response_headers_to_add", false); bad != "" {
		return h.invalid(bad), nil
	}
	return d, h.err
}

// denial is the denial resp (a status other than OK) asks for,
// without its headers: the status, the service's message and the body.
func denial(resp *CheckResponse) Decision {
	msg := "ext_authz: denied by the authorization service"
	if resp.Message != "" {
		msg += ": " + resp.Message
	}
	d := Decision{Outcome: Denied, Message: msg, Body: resp.DeniedBody}
	status := resp.DeniedStatus
	if status == 0 {
		status = 403
	}
	code, _ := resources.HTTPStatusToCode(status)
	d.Code, d.HTTPStatus = uint32(code), status
	return d
}

// httpRules reads one response under a configuration.
type httpRules struct {
	cfg      *resources.ExtAuthzConfig
	validate bool
	refused  string // the first change refused by rules that make it an error
	err      error  // a malformed response (an unknown append_action)
}

// options turns opts into mutations: names lower-cased, invalid changes
// left out (bad: the first, when validate_mutations makes it an error),
// and for the request's headers (request) the rules applied.
func (h *httpRules) options(opts []HeaderOption, field string, request bool) (out []Mutation, bad string) {
	for i, o := range opts {
		key := strings.ToLower(o.Key)
		if o.Action < AppendIfExistsOrAdd || o.Action > OverwriteIfExists {
			if h.err == nil {
				h.err = fmt.Errorf("%w: %s[%d]: unknown append_action %d", errMalformed, field, i, o.Action)
			}
			continue
		}
		if err := validHTTPHeader(key, o.Value); err != nil {
			if h.validate {
				return nil, fmt.Sprintf("%s[%d]: %v", field, i, err)
			}
			continue
		}
		if request && !h.allowed(key) {
			if h.refused != "" {
				return out, ""
			}
			continue
		}
		if request && key == ":authority" {
			key = "host"
		}
		if strings.HasPrefix(key, ":") {
			continue // not a header net/http carries
		}
		out = append(out, Mutation{Key: key, Value: o.Value, Action: o.Action})
	}
	return out, ""
}

// allowed reports whether decoder_header_mutation_rules let a change to
// the request's header key through (none set: every change). A refusal
// under disallow_is_error is kept in h.refused.
func (h *httpRules) allowed(key string) bool {
	raw := h.cfg.Raw.GetDecoderHeaderMutationRules()
	if raw == nil {
		return true
	}
	r := &h.cfg.MutationRules
	ok := true
	switch {
	case r.DisallowAll, r.Disallow != nil && r.Disallow.Match(key):
		ok = false
	case r.Allow != nil && r.Allow.Match(key):
	case strings.HasPrefix(key, ":"):
		routing := key == ":authority" || key == ":method" || key == ":scheme"
		ok = !raw.GetDisallowSystem().GetValue() && (!routing || raw.GetAllowAllRouting().GetValue())
	case key == "host":
		ok = raw.GetAllowAllRouting().GetValue()
	case strings.HasPrefix(key, "x-envoy"):
		ok = raw.GetAllowEnvoy().GetValue()
	}
	if !ok && r.DisallowIsError && h.refused == "" {
		h.refused = key
	}
	return ok
}

// invalid is the failure of a request whose service asked for an invalid
// change under validate_mutations: Envoy's local reply, 500.
func (h *httpRules) invalid(why string) Decision {
	return Decision{Outcome: Failed, Code: codeUnknown, HTTPStatus: 500,
		Message: "ext_authz: invalid header change from the authorization service (validate_mutations): " + why}
}

// validHTTPName is HTTP's rule for a field name (a token), with an
// optional leading ':' of a pseudo-header.
func validHTTPName(key string) error {
	name := strings.TrimPrefix(key, ":")
	if name == "" {
		return fmt.Errorf("header name %q is empty", key)
	}
	for i := 0; i < len(name); i++ {
		if !isTokenByte(name[i]) {
			return fmt.Errorf("header name %q has byte %q, not allowed in an HTTP header name", key, name[i])
		}
	}
	return nil
}

// validHTTPHeader is validHTTPName and a value without controls (tab
// aside): the bytes net/http refuses to send.
func validHTTPHeader(key, value string) error {
	if err := validHTTPName(key); err != nil {
		return err
	}
	for i := 0; i < len(value); i++ {
		if b := value[i]; (b < 0x20 && b != '\t') || b == 0x7f {
			return fmt.Errorf("header %q: value has byte 0x%02x at %d, not allowed in an HTTP header value", key, b, i)
		}
	}
	return nil
}

// isTokenByte reports whether b may be in an HTTP token (RFC 9110's tchar).
func isTokenByte(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}

// HostMutation takes a change to the request's host (which InterpretHTTP
// names "host") out of ms: net/http keeps it outside the headers. It
// returns the other changes, and the host to set, if any (a change that
// adds only if absent changes nothing: a request always has one).
func HostMutation(ms []Mutation) (rest []Mutation, host string, ok bool) {
	for _, m := range ms {
		if m.Key != "host" {
			rest = append(rest, m)
			continue
		}
		if !m.Remove && m.Action != AddIfAbsent {
			host, ok = m.Value, true
		}
	}
	return rest, host, ok
}
