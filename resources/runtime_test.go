package resources

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// layer builds a runtime layer from Go values; it panics on values
// structpb cannot hold, which tests never pass.
func layer(fields map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(fields)
	if err != nil {
		panic(err)
	}
	return s
}

// nested returns a struct value nesting v under keys, outermost first.
func nested(v *structpb.Value, keys ...string) *structpb.Value {
	for i := len(keys) - 1; i >= 0; i-- {
		v = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{keys[i]: v}})
	}
	return v
}

func TestDecodeRuntimeRules(t *testing.T) {
	deep := func(n int) *structpb.Struct {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "k"
		}
		return nested(structpb.NewBoolValue(true), keys...).GetStructValue()
	}
	tests := []struct {
		name    string
		edit    func(r *runtimev3.Runtime)
		wantErr string
	}{
		{name: "valid"},
		{name: "empty name", edit: func(r *runtimev3.Runtime) { r.Name = "" }, wantErr: "name: must not be empty"},
		{name: "no layer", edit: func(r *runtimev3.Runtime) { r.Layer = nil }},
		{name: "empty layer", edit: func(r *runtimev3.Runtime) { r.Layer = &structpb.Struct{} }},
		{name: "list", edit: func(r *runtimev3.Runtime) {
			r.Layer.Fields["a"] = nested(structpb.NewListValue(&structpb.ListValue{}), "b")
		}, wantErr: `layer: key "a.b": lists are not supported`},
		{name: "null", edit: func(r *runtimev3.Runtime) { r.Layer.Fields["n"] = structpb.NewNullValue() },
			wantErr: `layer: key "n": null is not supported`},
		{name: "unset value", edit: func(r *runtimev3.Runtime) { r.Layer.Fields["u"] = &structpb.Value{} },
			wantErr: `layer: key "u": no value`},
		{name: "infinite number", edit: func(r *runtimev3.Runtime) { r.Layer.Fields["i"] = structpb.NewNumberValue(math.Inf(1)) },
			wantErr: `layer: key "i": number +Inf is not finite`},
		{name: "nan", edit: func(r *runtimev3.Runtime) { r.Layer.Fields["i"] = nested(structpb.NewNumberValue(math.NaN()), "j") },
			wantErr: `layer: key "i.j": number NaN is not finite`},
		{name: "empty key", edit: func(r *runtimev3.Runtime) { r.Layer.Fields[""] = structpb.NewBoolValue(true) },
			wantErr: `layer: key "" has an empty element`},
		{name: "empty nested key", edit: func(r *runtimev3.Runtime) { r.Layer.Fields["a"] = nested(structpb.NewBoolValue(true), "") },
			wantErr: `layer: key "a." has an empty element`},
		{name: "dotted and nested spellings of one key", edit: func(r *runtimev3.Runtime) {
			r.Layer.Fields["x.y"] = structpb.NewNumberValue(1)
			r.Layer.Fields["x"] = nested(structpb.NewNumberValue(2), "y")
		}, wantErr: `layer: key "x.y" is set twice`},
		{name: "dotted and nested keys that differ", edit: func(r *runtimev3.Runtime) {
			r.Layer.Fields["x.y"] = structpb.NewNumberValue(1)
			r.Layer.Fields["x"] = nested(structpb.NewNumberValue(2), "z")
		}},
		{name: "nesting at the limit", edit: func(r *runtimev3.Runtime) { r.Layer = deep(maxRuntimeDepth) }},
		{name: "nesting past the limit", edit: func(r *runtimev3.Runtime) { r.Layer = deep(maxRuntimeDepth + 1) },
			wantErr: "nests deeper than 32 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &runtimev3.Runtime{Name: "rt", Layer: layer(map[string]any{"a": 1, "b": map[string]any{"c": "x"}})}
			if tt.edit != nil {
				tt.edit(r)
			}
			name, v, err := decodeMsg(RuntimeType, r)
			checkErr(t, err, tt.wantErr)
			if name != r.GetName() {
				t.Errorf("name = %q, want %q", name, r.GetName())
			}
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Errorf("error %v does not wrap a *FieldError", err)
				}
				return
			}
			if v.Name != "rt" || v.Raw == nil || v.ResourceName() != "rt" || v.Proto() != v.Raw {
				t.Errorf("value = %+v does not reflect the input", v)
			}
		})
	}
}

func TestRuntimeLookup(t *testing.T) {
	in := &runtimev3.Runtime{Name: "rt", Layer: layer(map[string]any{
		"health_check": map[string]any{"min_interval": 5, "max_interval": 10.5},
		"upstream": map[string]any{
			"use_http2": true,
			"zone_routing": map[string]any{
				"enabled":     "TRUE ",
				"min_cluster": "  42 ",
				"percent":     map[string]any{"numerator": 5, "denominator": "HUNDRED"},
			},
		},
		"flags": map[string]any{
			"off": "false", "zero": 0, "neg": -1, "frac": 0.5, "big": 1e21, "huge": 1234567.0,
			"inf": "Inf", "empty": map[string]any{}, "word": "hello", "strint": "7", "strneg": "-3",
		},
	})}
	_, r, err := decodeMsg(RuntimeType, in)
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{
		"flags.big", "flags.empty", "flags.frac", "flags.huge", "flags.inf", "flags.neg", "flags.off", "flags.strint",
		"flags.strneg", "flags.word", "flags.zero", "health_check.max_interval", "health_check.min_interval",
		"upstream.use_http2", "upstream.zone_routing.enabled", "upstream.zone_routing.min_cluster",
		"upstream.zone_routing.percent",
	}
	if got := r.Keys(); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("Keys = %v\nwant   %v", got, wantKeys)
	}

	type result struct {
		ok bool
		b  bool
		n  float64
		s  string
	}
	bools := map[string]result{
		"upstream.use_http2":                {ok: true, b: true},
		"upstream.zone_routing.enabled":     {ok: true, b: true},
		"flags.off":                         {ok: true, b: false},
		"upstream.zone_routing.min_cluster": {ok: true, b: true},
		"health_check.min_interval":         {ok: true, b: true},
		"flags.zero":                        {ok: true, b: false},
		"flags.strint":                      {ok: true, b: true},
		"flags.neg":                         {},
		"flags.frac":                        {},
		"flags.strneg":                      {},
		"flags.word":                        {},
		"flags.empty":                       {},
		"upstream":                          {},
		"missing":                           {},
	}
	for key, want := range bools {
		if b, ok := r.LookupBool(key); ok != want.ok || b != want.b {
			t.Errorf("LookupBool(%q) = %v, %v; want %v, %v", key, b, ok, want.b, want.ok)
		}
	}
	numbers := map[string]result{
		"health_check.min_interval":         {ok: true, n: 5},
		"health_check.max_interval":         {ok: true, n: 10.5},
		"upstream.zone_routing.min_cluster": {ok: true, n: 42},
		"flags.neg":                         {ok: true, n: -1},
		"flags.strneg":                      {ok: true, n: -3},
		"flags.inf":                         {},
		"flags.word":                        {},
		"upstream.use_http2":                {},
		"upstream.zone_routing.percent":     {},
		"missing":                           {},
	}
	for key, want := range numbers {
		if n, ok := r.LookupNumber(key); ok != want.ok || n != want.n {
			t.Errorf("LookupNumber(%q) = %v, %v; want %v, %v", key, n, ok, want.n, want.ok)
		}
	}
	strs := map[string]result{
		"flags.word":                    {ok: true, s: "hello"},
		"upstream.zone_routing.enabled": {ok: true, s: "TRUE "},
		"upstream.use_http2":            {ok: true, s: "true"},
		"health_check.min_interval":     {ok: true, s: "5"},
		"health_check.max_interval":     {ok: true, s: "10.5"},
		"flags.huge":                    {ok: true, s: "1234567"},
		"flags.big":                     {ok: true, s: "1e+21"},
		"flags.neg":                     {ok: true, s: "-1"},
		"upstream.zone_routing.percent": {},
		"flags.empty":                   {},
		"missing":                       {},
	}
	for key, want := range strs {
		if s, ok := r.LookupString(key); ok != want.ok || s != want.s {
			t.Errorf("LookupString(%q) = %q, %v; want %q, %v", key, s, ok, want.s, want.ok)
		}
	}
	pct, ok := r.LookupValue("upstream.zone_routing.percent")
	if !ok || pct.GetStructValue().GetFields()["denominator"].GetStringValue() != "HUNDRED" {
		t.Errorf("LookupValue(percent) = %v, %v", pct, ok)
	}
	if _, ok := r.LookupValue("upstream.zone_routing"); ok {
		t.Error("LookupValue found a level, not a value")
	}
}

func TestDecodeRuntimeGarbage(t *testing.T) {
	_, _, err := RuntimeType.DecodeTyped(nil, &anypb.Any{TypeUrl: RuntimeTypeURL, Value: []byte{0x12, 0x05}})
	checkErr(t, err, "Runtime: unmarshal Runtime")
	_, r, err := decodeMsg(RuntimeType, &runtimev3.Runtime{Name: "empty"})
	if err != nil || r.Layer != nil || len(r.Keys()) != 0 {
		t.Fatalf("empty runtime = %+v, %v", r, err)
	}
	if _, ok := r.LookupBool("x"); ok {
		t.Error("LookupBool on an empty layer succeeded")
	}
	if !strings.Contains(RuntimeType.TypeName(), "Runtime") {
		t.Errorf("TypeName = %q", RuntimeType.TypeName())
	}
}
