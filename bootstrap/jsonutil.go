package bootstrap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// fieldError is a problem with one field of the bootstrap, located by its
// JSON path (for example xds_servers[0].server_uri). An empty path means the
// document as a whole.
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return e.path + ": " + e.msg
}

func fieldErrorf(path, format string, args ...any) error {
	return &fieldError{path: path, msg: fmt.Sprintf(format, args...)}
}

// Path builders. The JSON names are used for Go-built values too, so that
// Parse and Validate speak of a field the same way.

func member(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

func mapKey(path, key string) string {
	return path + "[" + strconv.Quote(key) + "]"
}

// kindOf names the kind of JSON value raw holds, for error messages. It looks
// only at the first significant byte; callers decode raw afterwards anyway.
func kindOf(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// object is a decoded JSON object whose members are still raw.
type object map[string]json.RawMessage

// get returns the member key, treating an explicit null like an absent
// member, as encoding/json does for struct fields.
func (o object) get(key string) (json.RawMessage, bool) {
	raw, ok := o[key]
	if !ok || kindOf(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// str returns the string member key of o, or "" if it is absent.
func (o object) str(key, path string) (string, error) {
	raw, ok := o.get(key)
	if !ok {
		return "", nil
	}
	return asString(raw, path)
}

// stringField pairs a JSON member name with where its value goes.
type stringField struct {
	key string
	dst *string
}

// strs decodes each of fields from o, in order. path locates o.
func (o object) strs(path string, fields []stringField) error {
	for _, f := range fields {
		s, err := o.str(f.key, member(path, f.key))
		if err != nil {
			return err
		}
		*f.dst = s
	}
	return nil
}

// sortedKeys returns the keys of o in a fixed order, so that the first error
// reported for a map is the same on every run.
func (o object) sortedKeys() []string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func asObject(raw json.RawMessage, path string) (object, error) {
	if k := kindOf(raw); k != "object" {
		return nil, fieldErrorf(path, "must be a JSON object, got %s", k)
	}
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fieldErrorf(path, "%v", err)
	}
	return o, nil
}

func asArray(raw json.RawMessage, path string) ([]json.RawMessage, error) {
	if k := kindOf(raw); k != "array" {
		return nil, fieldErrorf(path, "must be a JSON array, got %s", k)
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fieldErrorf(path, "%v", err)
	}
	return a, nil
}

func asString(raw json.RawMessage, path string) (string, error) {
	if k := kindOf(raw); k != "string" {
		return "", fieldErrorf(path, "must be a string, got %s", k)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fieldErrorf(path, "%v", err)
	}
	return s, nil
}

func asStrings(raw json.RawMessage, path string) ([]string, error) {
	elems, err := asArray(raw, path)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		s, err := asString(e, index(path, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// compact returns raw without insignificant white space, so that kept
// configs print and compare the same however the file was indented.
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return slices.Clone(raw)
	}
	return b.Bytes()
}
