package rls

import (
	"slices"
	"strings"
)

// Headers is a request's headers as the key builders read them.
// route.Headers satisfies it; an adapter may give another view (grpcxds
// shows gRPC metadata as sent, "-bin" headers included, as gRPC's RLS
// policy reads it).
type Headers interface {
	// Get returns the values of header name (lower case) joined with
	// ",", and whether the request has it.
	Get(name string) (string, bool)
}

// Request is what a pick knows of one request.
type Request struct {
	// Path is "/service/method".
	Path string
	// Host is what a key builder's extra_keys.host takes: for gRPC the
	// channel's target (its endpoint), as gRPC gives it.
	Host string
	// Headers are the request's headers; nil reads as none.
	Headers Headers
}

// KeyBuilders are a config's grpc_keybuilders, by the path each name
// matches: "/service/method", or "/service/" for every method of a
// service.
type KeyBuilders struct {
	byPath map[string]*keyBuilder
}

// keyBuilder is one GrpcKeyBuilder.
type keyBuilder struct {
	headers               []headerKey
	constants             map[string]string
	host, service, method string // extra_keys; "" when unset
}

// headerKey is one of a builder's headers: key takes the value of the
// first of names the request has.
type headerKey struct {
	key   string
	names []string // lower case
}

// Keys returns the lookup keys of req (a map the caller owns), and the
// cache key: the path and keys in one string. A request whose path no
// builder names has no keys, and is looked up with an empty key map, as
// gRPC does.
func (kb *KeyBuilders) Keys(req *Request) (keys map[string]string, cacheKey string) {
	keys = make(map[string]string)
	i := strings.LastIndexByte(req.Path, '/')
	service, method := req.Path[:i+1], req.Path[i+1:]
	b := kb.byPath[req.Path]
	if b == nil {
		b = kb.byPath[service]
	}
	if b != nil {
		if req.Headers != nil {
			for _, h := range b.headers {
				for _, name := range h.names {
					if v, ok := req.Headers.Get(name); ok {
						keys[h.key] = v
						break
					}
				}
			}
		}
		if b.host != "" {
			keys[b.host] = req.Host
		}
		if b.service != "" {
			keys[b.service] = strings.Trim(service, "/")
		}
		if b.method != "" {
			keys[b.method] = method
		}
		for k, v := range b.constants {
			keys[k] = v
		}
	}
	return keys, cacheKeyOf(req.Path, keys)
}

// cacheKeyOf is the cache's key for a request to path with keys: the path
// and the keys in order, each string ended by a NUL, which neither a path
// nor a header value can hold.
func cacheKeyOf(path string, keys map[string]string) string {
	names := make([]string, 0, len(keys))
	n := len(path) + 1
	for k, v := range keys {
		names = append(names, k)
		n += len(k) + len(v) + 2
	}
	slices.Sort(names)
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteString(path)
	sb.WriteByte(0)
	for _, k := range names {
		sb.WriteString(k)
		sb.WriteByte(0)
		sb.WriteString(keys[k])
		sb.WriteByte(0)
	}
	return sb.String()
}

// validPath reports whether path is "/service/method" (one slash besides
// the first), the only form a key builder can match.
func validPath(path string) bool {
	return strings.HasPrefix(path, "/") && strings.Count(path, "/") == 2
}
