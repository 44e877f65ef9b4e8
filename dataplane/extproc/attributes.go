package extproc

import (
	"encoding/base64"
	"strings"
)

// RequestAttributes are the attributes (gRFC A93's request_attributes, of
// gRFC A106's names) that a gRPC request's path and headers give: its path
// (request.path, request.url_path), method and protocol, its headers
// (request.headers: each lower-case name's values joined with ",", a -bin
// header's base64-encoded as when it is sent, pseudo-headers left out),
// the ones a header names (request.host from :authority,
// request.useragent, request.referer, request.id from x-request-id) when
// present, and its query, which a gRPC path has none of. headers are the
// request's by lower-case name, a -bin header's values raw. Adapters add
// what else they know (the connection's addresses).
func RequestAttributes(path string, headers map[string][]string) map[string]any {
	all := make(map[string]string, len(headers))
	for k, vs := range headers {
		if strings.HasPrefix(k, ":") {
			continue
		}
		if strings.HasSuffix(k, "-bin") {
			enc := make([]string, len(vs))
			for i, v := range vs {
				enc[i] = base64.StdEncoding.EncodeToString([]byte(v))
			}
			vs = enc
		}
		all[k] = strings.Join(vs, ",")
	}
	a := map[string]any{
		"request.path":     path,
		"request.url_path": path,
		"request.method":   "POST",
		"request.protocol": "HTTP/2",
		"request.query":    "",
		"request.headers":  all,
	}
	for attr, header := range map[string]string{"request.host": ":authority", "request.useragent": "user-agent",
		"request.referer": "referer", "request.id": "x-request-id"} {
		if v := headers[header]; len(v) > 0 {
			a[attr] = v[0]
		}
	}
	return a
}

// ClientMetadata runs a gRPC request's headers (its metadata, md, which
// has no pseudo-headers) through ClientHeaders with :path path and
// :method POST added, and returns the headers the request goes on with:
// the processor's answer without the two, which are never changed (gRFC
// A102) and are not metadata. md is not changed.
func (c *Call) ClientMetadata(path string, md map[string][]string) (map[string][]string, error) {
	h := make(map[string][]string, len(md)+2)
	for k, v := range md {
		h[k] = v
	}
	h[":path"], h[":method"] = []string{path}, []string{"POST"}
	out, err := c.ClientHeaders(h)
	if err != nil {
		return nil, err
	}
	delete(out, ":path")
	delete(out, ":method")
	return out, nil
}
