package resources

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// RuntimeType is the built-in RTDS type: Runtime resources (one layer of
// runtime values each), decoded into *Runtime. Layers are fetched by name;
// a SotW response need not carry all of them, and there is no wildcard.
var RuntimeType = NewType(TypeOptions[*Runtime]{
	TypeURL: RuntimeTypeURL,
	Decode:  decodeRuntime,
})

// maxRuntimeDepth bounds how deeply a layer's structs may nest. Envoy reads
// layers with C++ protobuf's default limit of 100 nested messages, which a
// struct spends three at a time, so it cannot read much deeper either; the
// bound also keeps flattening (whose keys grow with the depth) linear.
const maxRuntimeDepth = 32

// Runtime is a validated RTDS layer. Like every decoded value it is
// immutable and shared: callers must not modify it.
//
// A layer is a tree of values that Envoy reads as flat keys: the fields of
// nested structs are joined with '.', so {"a": {"b": true}} sets key
// "a.b". A struct that is empty or has a "numerator" or "denominator"
// field is not a level but a value of its own (a fractional percent). The
// Lookup methods read a key the way Envoy's runtime does.
type Runtime struct {
	// Name is the resource name.
	Name string
	// Layer is the layer as received; nil for an empty layer.
	Layer *structpb.Struct
	// Raw is the message as received.
	Raw *runtimev3.Runtime

	// values holds every flattened key's value.
	values map[string]*structpb.Value
}

// ResourceName implements Resource.
func (r *Runtime) ResourceName() string {
	if r == nil {
		return ""
	}
	return r.Name
}

// Proto implements Resource; it returns Raw.
func (r *Runtime) Proto() proto.Message { return r.Raw }

// Keys returns every flattened key of the layer, sorted.
func (r *Runtime) Keys() []string { return sortedKeys(r.values) }

// LookupValue returns the value of key as received: a bool, number or
// string, or a struct (a fractional percent or an empty struct).
func (r *Runtime) LookupValue(key string) (*structpb.Value, bool) {
	v, ok := r.values[key]
	return v, ok
}

// LookupBool returns the value of key as a bool. Besides bools, Envoy
// reads the strings "true" and "false" in any case and with surrounding
// white space, and non-negative integers (numbers or decimal strings),
// which are true unless 0. ok is false if key is unset or not a bool.
func (r *Runtime) LookupBool(key string) (value, ok bool) {
	switch v := r.values[key].GetKind().(type) {
	case *structpb.Value_BoolValue:
		return v.BoolValue, true
	case *structpb.Value_NumberValue:
		if n := v.NumberValue; n >= 0 && n < math.MaxUint64 && n == math.Trunc(n) {
			return n != 0, true
		}
	case *structpb.Value_StringValue:
		s := strings.TrimSpace(v.StringValue)
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			return n != 0, true
		}
		switch {
		case equalFoldASCII(s, "true"):
			return true, true
		case equalFoldASCII(s, "false"):
			return false, true
		}
	}
	return false, false
}

// LookupNumber returns the value of key as a number: a number, or a string
// holding a finite decimal number (surrounding white space allowed). ok is
// false if key is unset or not a number.
func (r *Runtime) LookupNumber(key string) (float64, bool) {
	switch v := r.values[key].GetKind().(type) {
	case *structpb.Value_NumberValue:
		return v.NumberValue, true
	case *structpb.Value_StringValue:
		n, err := strconv.ParseFloat(strings.TrimSpace(v.StringValue), 64)
		if err == nil && !math.IsInf(n, 0) && !math.IsNaN(n) {
			return n, true
		}
	}
	return 0, false
}

// LookupString returns the value of key as the string Envoy keeps for it:
// a string as is, a bool as "true" or "false", a number in decimal (without
// an exponent for integers below 1e21). ok is false if key is unset or a
// struct.
func (r *Runtime) LookupString(key string) (string, bool) {
	switch v := r.values[key].GetKind().(type) {
	case *structpb.Value_StringValue:
		return v.StringValue, true
	case *structpb.Value_BoolValue:
		return strconv.FormatBool(v.BoolValue), true
	case *structpb.Value_NumberValue:
		n := v.NumberValue
		if n == math.Trunc(n) && math.Abs(n) < 1e21 {
			return strconv.FormatFloat(n, 'f', -1, 64), true
		}
		return strconv.FormatFloat(n, 'g', -1, 64), true
	}
	return "", false
}

func decodeRuntime(_ *DecodeContext, body *anypb.Any) (string, *Runtime, error) {
	m := new(runtimev3.Runtime)
	if err := proto.Unmarshal(body.GetValue(), m); err != nil {
		return "", nil, fmt.Errorf("unmarshal Runtime: %v", err)
	}
	name := m.GetName()
	if name == "" {
		return "", nil, fieldErrorf("name", "must not be empty")
	}
	r := &Runtime{Name: name, Layer: m.GetLayer(), Raw: m, values: make(map[string]*structpb.Value)}
	if err := r.flatten("", m.GetLayer(), 1); err != nil {
		return name, nil, at("layer", err)
	}
	return name, r, nil
}

// flatten adds the values of s under prefix. Fields are visited in sorted
// order so that, of several errors, the same one is always reported.
//
// Where Envoy is lenient this is strict, because what Envoy does there
// depends on map order: two spellings of one key ({"a.b": 1} and
// {"a": {"b": 2}}) are an error rather than a race, and so is an empty
// key element. Lists, nulls and unset values are errors, as in Envoy, and
// so are numbers that are not finite, which no JSON layer can hold.
func (r *Runtime) flatten(prefix string, s *structpb.Struct, depth int) error {
	fields := s.GetFields()
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if k == "" {
			return fmt.Errorf("key %q has an empty element", key)
		}
		v := fields[k]
		switch kind := v.GetKind().(type) {
		case *structpb.Value_StructValue:
			if !isRuntimeLeaf(kind.StructValue) {
				if depth >= maxRuntimeDepth {
					return fmt.Errorf("key %q nests deeper than %d levels", key, maxRuntimeDepth)
				}
				if err := r.flatten(key, kind.StructValue, depth+1); err != nil {
					return err
				}
				continue
			}
		case *structpb.Value_BoolValue, *structpb.Value_StringValue:
		case *structpb.Value_NumberValue:
			if math.IsInf(kind.NumberValue, 0) || math.IsNaN(kind.NumberValue) {
				return fmt.Errorf("key %q: number %v is not finite", key, kind.NumberValue)
			}
		case *structpb.Value_ListValue:
			return fmt.Errorf("key %q: lists are not supported (want a bool, number, string or struct)", key)
		case *structpb.Value_NullValue:
			return fmt.Errorf("key %q: null is not supported (want a bool, number, string or struct)", key)
		default:
			return fmt.Errorf("key %q: no value", key)
		}
		if _, dup := r.values[key]; dup {
			return fmt.Errorf("key %q is set twice", key)
		}
		r.values[key] = v
	}
	return nil
}

// isRuntimeLeaf reports whether a struct in a layer is a value rather than
// a level: an empty struct, or a fractional percent.
func isRuntimeLeaf(s *structpb.Struct) bool {
	f := s.GetFields()
	if len(f) == 0 {
		return true
	}
	_, num := f["numerator"]
	_, den := f["denominator"]
	return num || den
}
