package extauthz

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goxds/xds/resources"
)

// The header changes a service asks for, as gRFC A102 reads them: shared
// with the external processing filter (package dataplane/extproc).

// Permitted reports whether rules let a change to header key through:
// never one to a pseudo-header or host (gRFC A102, whatever
// allow_all_routing and disallow_system say), else as rules.Allowed says.
// A change the rules refuse is refused even where it would do nothing (an
// ADD_IF_ABSENT of a header already there).
func Permitted(rules *resources.HeaderMutationRules, key string) bool {
	return key != "host" && !strings.HasPrefix(key, ":") && rules.Allowed(key)
}

// Mutations validates a service's header changes (gRFC A102's
// HeaderValueOption, which the external processing filter, gRFC A93,
// shares: see ValidHeader; an unknown append_action is malformed too) and
// turns them into mutations, leaving out, with rules, those the rules do
// not permit (Permitted). A change that leaves a header empty keeps it:
// gRFC A102 does not read keep_empty_value. The error names the entry of
// field that is malformed.
func Mutations(rules *resources.HeaderMutationRules, opts []HeaderOption, field string) ([]Mutation, error) {
	var out []Mutation
	for i, o := range opts {
		if err := ValidHeader(o.Key, o.Value); err != nil {
			return nil, fmt.Errorf("%s[%d]: %v", field, i, err)
		}
		if o.Action < AppendIfExistsOrAdd || o.Action > OverwriteIfExists {
			return nil, fmt.Errorf("%s[%d]: unknown append_action %d", field, i, o.Action)
		}
		if rules != nil && !Permitted(rules, o.Key) {
			continue
		}
		out = append(out, Mutation{Key: o.Key, Value: o.Value, Action: o.Action})
	}
	return out, nil
}

// maxHeaderLen is gRFC A102's limit on a header's name and on its value.
const maxHeaderLen = 16384

// ValidHeaderName is gRPC's rule for a header name (gRFC A92's for an
// entry of headers_to_remove): not empty, at most 16384 bytes, of
// lower-case letters, digits, '-', '_' and '.'. A pseudo-header is not
// one.
func ValidHeaderName(key string) error {
	switch {
	case key == "":
		return errors.New("empty header name")
	case len(key) > maxHeaderLen:
		return fmt.Errorf("header name longer than %d bytes", maxHeaderLen)
	}
	for i := 0; i < len(key); i++ {
		b := key[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.') {
			return fmt.Errorf("header name %q is not a valid gRPC header name (byte %q at %d)", key, b, i)
		}
	}
	return nil
}

// ValidHeader is gRFC A102's rule for a header (HeaderValue) read from a
// side-channel service: a valid gRPC header name (ValidHeaderName) that is
// neither host nor in the grpc- space gRPC reserves, and a value of at
// most 16384 bytes that is printable ASCII unless the header is binary
// (-bin, whose value is raw bytes).
func ValidHeader(key, value string) error {
	if strings.HasPrefix(key, ":") {
		return fmt.Errorf("header %q is a pseudo-header, which may not be set", key)
	}
	if err := ValidHeaderName(key); err != nil {
		return err
	}
	switch {
	case key == "host":
		return fmt.Errorf("header %q may not be set", key)
	case strings.HasPrefix(key, "grpc-"):
		return fmt.Errorf("header %q is in the grpc- space gRPC reserves", key)
	case len(value) > maxHeaderLen:
		return fmt.Errorf("header %q: value longer than %d bytes", key, maxHeaderLen)
	case strings.HasSuffix(key, "-bin"):
		return nil
	}
	for i := 0; i < len(value); i++ {
		if b := value[i]; b < 0x20 || b > 0x7e {
			return fmt.Errorf("header %q: value has byte 0x%02x at %d, which gRPC cannot send", key, b, i)
		}
	}
	return nil
}

// Apply applies ms to h in order.
func Apply(h map[string][]string, ms []Mutation) {
	for _, m := range ms {
		_, exists := h[m.Key]
		switch {
		case m.Remove:
			delete(h, m.Key)
		case m.Action == AppendIfExistsOrAdd:
			h[m.Key] = append(h[m.Key], m.Value)
		case m.Action == AddIfAbsent:
			if !exists {
				h[m.Key] = []string{m.Value}
			}
		case m.Action == OverwriteIfExistsOrAdd:
			h[m.Key] = []string{m.Value}
		case m.Action == OverwriteIfExists:
			if exists {
				h[m.Key] = []string{m.Value}
			}
		}
	}
}
