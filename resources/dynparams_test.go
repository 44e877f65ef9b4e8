package resources

import (
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

type dpc = discoveryv3.DynamicParameterConstraints

func cValue(k, v string) *dpc {
	return &dpc{Type: &discoveryv3.DynamicParameterConstraints_Constraint{Constraint: &discoveryv3.DynamicParameterConstraints_SingleConstraint{
		Key: k, ConstraintType: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Value{Value: v}}}}
}

func cExists(k string) *dpc {
	return &dpc{Type: &discoveryv3.DynamicParameterConstraints_Constraint{Constraint: &discoveryv3.DynamicParameterConstraints_SingleConstraint{
		Key: k, ConstraintType: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Exists_{Exists: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Exists{}}}}}
}

func cAnd(cs ...*dpc) *dpc {
	return &dpc{Type: &discoveryv3.DynamicParameterConstraints_AndConstraints{AndConstraints: &discoveryv3.DynamicParameterConstraints_ConstraintList{Constraints: cs}}}
}

func cOr(cs ...*dpc) *dpc {
	return &dpc{Type: &discoveryv3.DynamicParameterConstraints_OrConstraints{OrConstraints: &discoveryv3.DynamicParameterConstraints_ConstraintList{Constraints: cs}}}
}

func cNot(c *dpc) *dpc {
	return &dpc{Type: &discoveryv3.DynamicParameterConstraints_NotConstraints{NotConstraints: c}}
}

func TestMatchConstraints(t *testing.T) {
	prod := map[string]string{"env": "prod"}
	prodEU := map[string]string{"env": "prod", "region": "eu"}
	for _, tc := range []struct {
		name   string
		c      *dpc
		params map[string]string
		want   bool
	}{
		{"nil matches all", nil, prodEU, true},
		{"nil matches none", nil, nil, true},
		{"empty message matches all", &dpc{}, nil, true},
		{"value equal", cValue("env", "prod"), prod, true},
		{"value differs", cValue("env", "dev"), prod, false},
		{"value key absent", cValue("env", ""), nil, false},
		{"value empty present", cValue("env", ""), map[string]string{"env": ""}, true},
		{"exists present", cExists("env"), prod, true},
		{"exists absent", cExists("region"), prod, false},
		{"not exists: default for clients without the key", cNot(cExists("env")), nil, true},
		{"not exists with key", cNot(cExists("env")), prod, false},
		{"and all", cAnd(cValue("env", "prod"), cValue("region", "eu")), prodEU, true},
		{"and one fails", cAnd(cValue("env", "prod"), cValue("region", "us")), prodEU, false},
		{"and empty", cAnd(), nil, true},
		{"or one", cOr(cValue("env", "dev"), cValue("region", "eu")), prodEU, true},
		{"or none", cOr(cValue("env", "dev"), cValue("region", "us")), prodEU, false},
		{"or empty", cOr(), prodEU, false},
		{"nested", cAnd(cExists("env"), cNot(cOr(cValue("region", "us"), cValue("region", "ap")))), prodEU, true},
		{"nested fails", cAnd(cExists("env"), cNot(cOr(cValue("region", "us"), cValue("region", "eu")))), prodEU, false},
		{"double not", cNot(cNot(cValue("env", "prod"))), prod, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ValidateConstraints(tc.c); err != nil {
				t.Fatalf("ValidateConstraints(%s): %v", ConstraintsString(tc.c), err)
			}
			if got := MatchConstraints(tc.c, tc.params); got != tc.want {
				t.Errorf("MatchConstraints(%s, %v) = %v, want %v", ConstraintsString(tc.c), tc.params, got, tc.want)
			}
		})
	}
}

func TestValidateConstraintsErrors(t *testing.T) {
	deep := cValue("k", "v")
	for range maxConstraintDepth {
		deep = cNot(deep)
	}
	for _, tc := range []struct {
		name string
		c    *dpc
		want string
	}{
		{"empty key", cValue("", "v"), "constraints.constraint: empty key"},
		{"no value nor exists", &dpc{Type: &discoveryv3.DynamicParameterConstraints_Constraint{Constraint: &discoveryv3.DynamicParameterConstraints_SingleConstraint{Key: "k"}}}, `(key "k"): neither value nor exists`},
		{"empty nested node", cAnd(cValue("a", "b"), &dpc{}), "constraints.and_constraints[1]: none of constraint"},
		{"nil in list", cOr(nil), "constraints.or_constraints[0]: empty"},
		{"empty not", cNot(nil), "constraints.not_constraints: empty"},
		{"too deep", deep, "nested more than 32 levels deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateConstraints(tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ValidateConstraints = %v, want an error containing %q", err, tc.want)
			}
			if MatchConstraints(tc.c, map[string]string{"a": "b", "k": "v"}) && tc.name != "too deep" {
				// A malformed node matches nothing, so no invalid
				// constraint can select a variant by accident.
				t.Errorf("malformed constraints matched")
			}
		})
	}
}

func TestConstraintsString(t *testing.T) {
	c := cAnd(cValue("env", "prod"), cNot(cOr(cExists("canary"), cValue("region", "us"))))
	want := `and(env="prod", not(or(exists(canary), region="us")))`
	if got := ConstraintsString(c); got != want {
		t.Errorf("ConstraintsString = %s, want %s", got, want)
	}
	if got := ConstraintsString(nil); got != "none" {
		t.Errorf("ConstraintsString(nil) = %s", got)
	}
}

func TestFromResourceNameAndResourceName(t *testing.T) {
	_, err := FromResource(&discoveryv3.Resource{Name: "a", ResourceName: &discoveryv3.ResourceName{Name: "a"}})
	if err == nil || !strings.Contains(err.Error(), "both name and resource_name") {
		t.Fatalf("FromResource with both names: %v", err)
	}
	env, err := FromResource(&discoveryv3.Resource{ResourceName: &discoveryv3.ResourceName{Name: "a", DynamicParameterConstraints: cValue("env", "prod")}})
	if err != nil || env.Name != "a" || env.Constraints == nil {
		t.Fatalf("FromResource = %+v, %v", env, err)
	}
	_, err = FromResource(&discoveryv3.Resource{ResourceName: &discoveryv3.ResourceName{Name: "a", DynamicParameterConstraints: cAnd(&dpc{})}})
	if err == nil || !strings.Contains(err.Error(), `resource "a": dynamic parameter constraints.and_constraints[0]`) {
		t.Fatalf("FromResource with a malformed constraint: %v", err)
	}
}

// FuzzDynamicParameters feeds arbitrary bytes as a SotW wrapper (the way
// constraints reach the client in either protocol): unwrapping must not
// panic, and constraints it lets through must validate, match without
// panicking, and render.
func FuzzDynamicParameters(f *testing.F) {
	for _, c := range []*dpc{cValue("env", "prod"), cNot(cExists("env")), cAnd(cOr(cValue("a", "1"), cExists("b")), cNot(cValue("c", "")))} {
		b, err := proto.Marshal(&discoveryv3.Resource{ResourceName: &discoveryv3.ResourceName{Name: "r", DynamicParameterConstraints: c}, Version: "1"})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "env", "prod")
	}
	f.Fuzz(func(t *testing.T, b []byte, k, v string) {
		env, err := Unwrap(&anypb.Any{TypeUrl: WrapperTypeURL, Value: b})
		if err != nil {
			return
		}
		if env.Constraints == nil {
			return
		}
		if err := ValidateConstraints(env.Constraints); err != nil {
			t.Fatalf("Unwrap let through invalid constraints: %v", err)
		}
		_ = MatchConstraints(env.Constraints, map[string]string{k: v})
		_ = MatchConstraints(env.Constraints, nil)
		if ConstraintsString(env.Constraints) == "" {
			t.Fatal("empty rendering")
		}
	})
}
