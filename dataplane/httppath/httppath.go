package httppath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goxds/xds/resources"
)

// Options is how paths are normalized: a Listener's
// resources.PathNormalization with the defaults resolved (Resolve).
type Options struct {
	// Normalize is normalize_path: RFC 3986 normalization.
	Normalize bool
	// MergeSlashes is merge_slashes.
	MergeSlashes bool
	// EscapedSlashes is path_with_escaped_slashes_action, never
	// resources.EscapedSlashesDefault.
	EscapedSlashes resources.EscapedSlashesAction
}

// Resolve applies the package's defaults (see the package doc) to what a
// Listener's connection manager says.
func Resolve(p resources.PathNormalization) Options {
	o := Options{Normalize: true, MergeSlashes: true, EscapedSlashes: p.EscapedSlashes}
	if p.NormalizePath != nil {
		o.Normalize = *p.NormalizePath
	}
	if o.EscapedSlashes == resources.EscapedSlashesDefault {
		o.EscapedSlashes = resources.EscapedSlashesKeep
	}
	return o
}

// Action is what the adapter does with a normalized path.
type Action int

const (
	// Continue: route and serve the request with the path returned.
	Continue Action = iota
	// Redirect: answer with a redirect to the path returned
	// (UNESCAPE_AND_REDIRECT found an escaped slash).
	Redirect
)

// ErrEscapedSlash is the error of a path holding an escaped slash under
// REJECT_REQUEST.
var ErrEscapedSlash = errors.New("path holds an escaped slash (%2F or %5C) and path_with_escaped_slashes_action is REJECT_REQUEST")

// Normalize normalizes path, the request target's path as received
// (percent-encoded, without the query), as o says. It returns the path to
// route, authorize and serve, and whether to redirect to it; an error says
// why the path cannot be normalized, for a 400.
//
// A path that needs nothing is returned as it is, without allocating.
func Normalize(path string, o Options) (string, Action, error) {
	if path == "" || path[0] != '/' {
		return "", Continue, fmt.Errorf("path %q does not start with \"/\"", path)
	}
	if clean(path) {
		return path, Continue, nil
	}
	if strings.IndexByte(path, '#') >= 0 {
		return "", Continue, fmt.Errorf("path %q holds a fragment (\"#\")", path)
	}
	act := Continue
	if o.EscapedSlashes != resources.EscapedSlashesKeep && hasEscapedSlash(path) {
		switch o.EscapedSlashes {
		case resources.EscapedSlashesReject:
			return "", Continue, ErrEscapedSlash
		case resources.EscapedSlashesUnescapeAndRedirect:
			act = Redirect
		}
		path = unescapeSlashes(path)
	}
	if o.Normalize {
		var err error
		if path, err = normalize(path); err != nil {
			return "", Continue, err
		}
	} else if err := check(path); err != nil {
		return "", Continue, err
	}
	if o.MergeSlashes {
		path = mergeSlashes(path)
	}
	return path, act, nil
}

// clean reports whether path needs nothing whatever the options: only
// bytes kept as they are, no "%", "\", "." next to a "/" or "//".
func clean(path string) bool {
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c == '%' || c == '\\' || c == '#' || c < 0x21 || c >= 0x7f:
			return false
		case c == '/' && i > 0 && path[i-1] == '/':
			return false
		case c == '.' && path[i-1] == '/' && (i+1 == len(path) || path[i+1] == '/' || path[i+1] == '.'):
			// "/." or "/.." as a segment or its start; path[0] is '/',
			// so i-1 is in range.
			return false
		}
	}
	return true
}

func hasEscapedSlash(path string) bool {
	for i := 0; i+2 < len(path); i++ {
		if path[i] == '%' && isSlashEscape(path[i+1], path[i+2]) {
			return true
		}
	}
	return false
}

func isSlashEscape(a, b byte) bool {
	return (a == '2' && (b == 'F' || b == 'f')) || (a == '5' && (b == 'C' || b == 'c'))
}

func unescapeSlashes(path string) string {
	var b strings.Builder
	b.Grow(len(path))
	for i := 0; i < len(path); i++ {
		if path[i] == '%' && i+2 < len(path) && isSlashEscape(path[i+1], path[i+2]) {
			if path[i+1] == '2' {
				b.WriteByte('/')
			} else {
				b.WriteByte('\\')
			}
			i += 2
			continue
		}
		b.WriteByte(path[i])
	}
	return b.String()
}

// check refuses what no option makes valid: a bad percent-encoding or a
// control character.
func check(path string) error {
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("path %q holds control character %#x", path, c)
		case c == '%':
			if i+2 >= len(path) || !isHex(path[i+1]) || !isHex(path[i+2]) {
				return fmt.Errorf("path %q holds a %%-encoding that is not %%XX (at byte %d)", path, i)
			}
		}
	}
	return nil
}

// normalize is RFC 3986 normalization: the characters, then the dot
// segments.
func normalize(path string) (string, error) {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(path))
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c < 0x20 || c == 0x7f:
			return "", fmt.Errorf("path %q holds control character %#x", path, c)
		case c == '%':
			if i+2 >= len(path) || !isHex(path[i+1]) || !isHex(path[i+2]) {
				return "", fmt.Errorf("path %q holds a %%-encoding that is not %%XX (at byte %d)", path, i)
			}
			d := unhex(path[i+1])<<4 | unhex(path[i+2])
			if unreserved(d) {
				b.WriteByte(d)
			} else {
				b.WriteByte('%')
				b.WriteByte(hex[d>>4])
				b.WriteByte(hex[d&15])
			}
			i += 2
		case c == '\\':
			b.WriteByte('/')
		case c == ' ' || c >= 0x80:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	return removeDotSegments(b.String()), nil
}

// removeDotSegments is RFC 3986 section 5.2.4 on an absolute path: "."
// segments go, ".." removes the segment before it (none above the root),
// and a path ending in either ends with "/".
func removeDotSegments(path string) string {
	segs := strings.Split(path[1:], "/")
	out := segs[:0]
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
			continue
		}
		if last {
			out = append(out, "")
		}
	}
	return "/" + strings.Join(out, "/")
}

func mergeSlashes(path string) string {
	if !strings.Contains(path, "//") {
		return path
	}
	var b strings.Builder
	b.Grow(len(path))
	for i := 0; i < len(path); i++ {
		if path[i] == '/' && i > 0 && path[i-1] == '/' {
			continue
		}
		b.WriteByte(path[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// unreserved is RFC 3986's unreserved set.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
