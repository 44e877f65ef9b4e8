package route

import "strings"

// GRPCHeaders is a gRPC request's metadata as routing sees its headers
// (gRFC A28): names in lower case, each with its values as sent, which is
// what grpc-go's metadata.MD is, so that an adapter converts one for free.
// Get joins a header's values with ","; binary headers ("-bin") are never
// seen; content-type is always "application/grpc", as gRPC sends it,
// though a client's metadata does not carry it.
type GRPCHeaders map[string][]string

// Get implements Headers.
func (h GRPCHeaders) Get(name string) (string, bool) {
	switch {
	case strings.HasSuffix(name, "-bin"):
		return "", false
	case name == "content-type":
		return "application/grpc", true
	}
	vs := h[name]
	return JoinValues(vs)
}

// Last implements Headers: the last value as sent.
func (h GRPCHeaders) Last(name string) (string, bool) {
	vs := h[name]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}
