package resources

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Resource is a decoded and validated xDS resource. Values are immutable once
// returned by a decoder: they are shared by every watcher of the resource, so
// neither the library nor its users may modify them.
type Resource interface {
	// ResourceName is the name the resource is known by on the wire.
	ResourceName() string
	// Proto is the message the value was decoded from, for fields the Go
	// value does not model. Callers must not modify it.
	Proto() proto.Message
}

// AnyType is a resource type seen without its Go value type: what the client
// needs to subscribe to, decode and cache resources of the type. Every
// *Type[T] is an AnyType.
type AnyType interface {
	// TypeURL is the xDS type URL, e.g. ListenerTypeURL.
	TypeURL() string
	// TypeName is a short name for logs, e.g. "Listener".
	TypeName() string
	// AllResourcesRequiredInSotW reports whether each SotW response carries
	// the whole state of the world for this type (Listener, Cluster), so
	// that a resource missing from a response has been deleted.
	AllResourcesRequiredInSotW() bool
	// SupportsWildcard reports whether the wildcard name "*" may be used.
	SupportsWildcard() bool
	// DeltaOnly reports whether the type can only be fetched over the
	// delta protocol (VHDS).
	DeltaOnly() bool
	// Decode decodes and validates one resource body (already unwrapped
	// from discovery.v3.Resource; see Unwrap), received in ctx (which may
	// be nil: see DecodeContext). It returns the resource name whenever it
	// can be read, even if validation fails, so that the error can be
	// attributed to the right resource.
	Decode(ctx *DecodeContext, body *anypb.Any) (name string, value Resource, err error)
}

// DecodeFunc decodes and validates the bytes of one resource of a type
// whose Go value is T. On failure it returns the resource's name if the
// bytes were readable enough to learn it, so the error reaches the right
// watchers; an empty name makes the error apply to the whole response.
//
// ctx says where the resource came from: the server that sent it, the
// client's bootstrap and registry. It is never nil (a Type passes the zero
// DecodeContext for a nil one), and a decoder whose rules do not depend on
// the source simply ignores it:
//
//	Decode: func(_ *resources.DecodeContext, b *anypb.Any) (string, *Mine, error) { return decodeMine(b) },
//
// A decoded value that depends on ctx (a Cluster's LRSServer) is decoded
// again when the same bytes come from another server.
//
// A client.Client runs it with its lock held: it decodes each resource of
// a response as it applies the response to its cache, which lets it skip
// the bytes it already holds (a SotW server resends every resource of a
// type), and values persisted on disk the same way. A DecodeFunc must
// therefore not call into the client that decodes (a watch, Dump, Close:
// that deadlocks), should not block (every watch, response and timer of
// that client waits meanwhile), and must be safe for concurrent use, since
// several clients may share a type.
type DecodeFunc[T Resource] func(ctx *DecodeContext, body *anypb.Any) (name string, value T, err error)

// TypeOptions describe a resource type to NewType.
type TypeOptions[T Resource] struct {
	// TypeURL is the xDS type URL. Required.
	TypeURL string
	// TypeName is a short name for logs. Defaults to the last element of
	// the type URL.
	TypeName string
	// AllResourcesRequiredInSotW: see AnyType.
	AllResourcesRequiredInSotW bool
	// SupportsWildcard: see AnyType.
	SupportsWildcard bool
	// DeltaOnly: see AnyType.
	DeltaOnly bool
	// Decode decodes and validates one resource. Required.
	Decode DecodeFunc[T]
}

// Type is a resource type whose decoded values are T. Types are values, not
// implementations of an interface, so a new type needs only a decoder.
type Type[T Resource] struct {
	url              string
	name             string
	allRequired      bool
	supportsWildcard bool
	deltaOnly        bool
	decode           DecodeFunc[T]
}

// NewType returns a resource type described by opts. It panics if TypeURL or
// Decode is missing, since that is a programming error found at start-up.
func NewType[T Resource](opts TypeOptions[T]) *Type[T] {
	if opts.TypeURL == "" || opts.Decode == nil {
		panic("resources.NewType: TypeURL and Decode are required")
	}
	name := opts.TypeName
	if name == "" {
		name = shortName(opts.TypeURL)
	}
	return &Type[T]{
		url:              opts.TypeURL,
		name:             name,
		allRequired:      opts.AllResourcesRequiredInSotW,
		supportsWildcard: opts.SupportsWildcard,
		deltaOnly:        opts.DeltaOnly,
		decode:           opts.Decode,
	}
}

// TypeURL implements AnyType.
func (t *Type[T]) TypeURL() string { return t.url }

// TypeName implements AnyType.
func (t *Type[T]) TypeName() string { return t.name }

// AllResourcesRequiredInSotW implements AnyType.
func (t *Type[T]) AllResourcesRequiredInSotW() bool { return t.allRequired }

// SupportsWildcard implements AnyType.
func (t *Type[T]) SupportsWildcard() bool { return t.supportsWildcard }

// DeltaOnly implements AnyType.
func (t *Type[T]) DeltaOnly() bool { return t.deltaOnly }

// Decode implements AnyType. A body whose type URL is not this type's is
// rejected before the decoder sees it.
func (t *Type[T]) Decode(ctx *DecodeContext, body *anypb.Any) (string, Resource, error) {
	name, v, err := t.DecodeTyped(ctx, body)
	if err != nil {
		return name, nil, err
	}
	return name, v, nil
}

// noContext is what a decoder gets for a nil *DecodeContext. Decoders
// must not modify it.
var noContext DecodeContext

// DecodeTyped is Decode returning the Go value type. ctx may be nil: a
// resource decoded outside a client (see DecodeContext).
func (t *Type[T]) DecodeTyped(ctx *DecodeContext, body *anypb.Any) (name string, value T, err error) {
	if ctx == nil {
		ctx = &noContext
	}
	if body == nil {
		return "", value, errors.New("empty resource body")
	}
	if body.GetTypeUrl() != t.url {
		return "", value, fmt.Errorf("resource has type_url %q, want %q", body.GetTypeUrl(), t.url)
	}
	name, value, err = t.decode(ctx, body)
	if err != nil {
		if name != "" {
			return name, value, fmt.Errorf("%s %q: %w", t.name, name, err)
		}
		return "", value, fmt.Errorf("%s: %w", t.name, err)
	}
	if value.ResourceName() != name {
		// A decoder bug, not server input; still never a panic.
		return name, value, fmt.Errorf("%s decoder returned name %q for a value named %q", t.name, name, value.ResourceName())
	}
	return name, value, nil
}

// String returns the Type[T] as text, for logs and errors.
func (t *Type[T]) String() string { return t.name }

func shortName(typeURL string) string {
	for i := len(typeURL) - 1; i >= 0; i-- {
		if typeURL[i] == '.' || typeURL[i] == '/' {
			return typeURL[i+1:]
		}
	}
	return typeURL
}
