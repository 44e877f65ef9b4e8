package resources

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// FieldError is a validation error in one field of a resource. Path is the
// field's location inside the resource in proto field names, e.g.
// "virtual_hosts[0].routes[2].match"; it is empty for errors about the
// resource as a whole. Decoders of the built-in types return errors that
// wrap a *FieldError, so callers can find it with errors.As.
type FieldError struct {
	Path string
	Err  error
}

// Error implements error.
func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

// Unwrap returns the underlying error, for errors.Is and errors.As.
func (e *FieldError) Unwrap() error { return e.Err }

// fieldErrorf returns a *FieldError at path with a formatted message.
func fieldErrorf(path, format string, args ...any) error {
	return &FieldError{Path: path, Err: fmt.Errorf(format, args...)}
}

// at returns err moved one level down: its path gains the prefix field, so
// a child's "match" error becomes "routes[2].match" in its parent. Building
// paths this way costs nothing unless validation fails.
func at(field string, err error) error {
	fe, ok := err.(*FieldError)
	if !ok {
		return &FieldError{Path: field, Err: err}
	}
	switch {
	case fe.Path == "":
		return &FieldError{Path: field, Err: fe.Err}
	case strings.HasPrefix(fe.Path, "["):
		return &FieldError{Path: field + fe.Path, Err: fe.Err}
	default:
		return &FieldError{Path: field + "." + fe.Path, Err: fe.Err}
	}
}

// index formats a repeated field element's path, e.g. index("routes", 2).
func index(field string, i int) string {
	return field + "[" + strconv.Itoa(i) + "]"
}

// anyIs reports whether a holds the message whose full proto name is
// fullName. Like anypb.Any.MessageIs it looks only at the part of the type
// URL after the last '/', so any URL prefix is accepted.
func anyIs(a *anypb.Any, fullName string) bool {
	url := a.GetTypeUrl()
	i := strings.LastIndexByte(url, '/')
	return url[i+1:] == fullName
}

// anyName returns the full message name a holds, for error messages.
func anyName(a *anypb.Any) string {
	url := a.GetTypeUrl()
	if url == "" {
		return "(empty type_url)"
	}
	return url[strings.LastIndexByte(url, '/')+1:]
}

// duration converts a proto duration that must be valid and not negative.
func duration(d *durationpb.Duration) (time.Duration, error) {
	if err := d.CheckValid(); err != nil {
		return 0, fmt.Errorf("invalid duration: %v", err)
	}
	v := d.AsDuration()
	if v < 0 {
		return 0, fmt.Errorf("must not be negative, got %v", v)
	}
	return v, nil
}

// optionalDuration is duration for a field that may be unset (nil result).
func optionalDuration(d *durationpb.Duration) (*time.Duration, error) {
	if d == nil {
		return nil, nil
	}
	v, err := duration(d)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// ASCII case-insensitive comparisons. Host names and paths are ASCII on the
// wire (IDNs travel as punycode, paths percent-encoded), and folding only
// ASCII keeps byte offsets aligned, so these never allocate.

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

func hasPrefixFoldASCII(s, prefix string) bool {
	return len(s) >= len(prefix) && equalFoldASCII(s[:len(prefix)], prefix)
}

func hasSuffixFoldASCII(s, suffix string) bool {
	return len(s) >= len(suffix) && equalFoldASCII(s[len(s)-len(suffix):], suffix)
}

func toLowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = lowerASCII(b[j])
			}
			return string(b)
		}
	}
	return s
}
