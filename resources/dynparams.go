package resources

import (
	"fmt"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// Dynamic parameters (discovery.v3 ResourceLocator, ResourceName,
// DynamicParameterConstraints) let a server keep several variants of one
// resource name and a client pick among them: the client subscribes with a
// set of key/value parameters, the server names each variant with the
// constraints it satisfies, and the client hands each variant to the
// subscriptions whose parameters it matches.

// maxConstraintDepth bounds how deeply constraints may nest. Protobuf
// decoding already stops at 10,000 levels; real constraints are a few
// levels deep, and a bound far below the decoder's keeps the recursive
// matcher's stack small whatever a server sends.
const maxConstraintDepth = 32

// ValidateConstraints checks that c is well formed: every node sets exactly
// one of constraint, or_constraints, and_constraints, not_constraints; every
// single constraint has a key and sets value or exists; nesting is at most
// 32 levels deep. A nil c (no constraints: the variant matches every
// subscription) is valid, and so is an empty top-level message, which says
// the same. The error names the path of the faulty node.
func ValidateConstraints(c *discoveryv3.DynamicParameterConstraints) error {
	if c == nil || c.GetType() == nil {
		return nil
	}
	return validateConstraint(c, "constraints", 0)
}

func validateConstraint(c *discoveryv3.DynamicParameterConstraints, path string, depth int) error {
	if depth >= maxConstraintDepth {
		return fmt.Errorf("%s: nested more than %d levels deep", path, maxConstraintDepth)
	}
	switch t := c.GetType().(type) {
	case *discoveryv3.DynamicParameterConstraints_Constraint:
		sc := t.Constraint
		if sc.GetKey() == "" {
			return fmt.Errorf("%s.constraint: empty key", path)
		}
		if sc.GetConstraintType() == nil {
			return fmt.Errorf("%s.constraint (key %q): neither value nor exists is set", path, sc.GetKey())
		}
		return nil
	case *discoveryv3.DynamicParameterConstraints_OrConstraints:
		return validateList(t.OrConstraints, path+".or_constraints", depth)
	case *discoveryv3.DynamicParameterConstraints_AndConstraints:
		return validateList(t.AndConstraints, path+".and_constraints", depth)
	case *discoveryv3.DynamicParameterConstraints_NotConstraints:
		if t.NotConstraints == nil {
			return fmt.Errorf("%s.not_constraints: empty", path)
		}
		return validateConstraint(t.NotConstraints, path+".not_constraints", depth+1)
	}
	return fmt.Errorf("%s: none of constraint, or_constraints, and_constraints, not_constraints is set", path)
}

func validateList(l *discoveryv3.DynamicParameterConstraints_ConstraintList, path string, depth int) error {
	for i, c := range l.GetConstraints() {
		if c == nil {
			return fmt.Errorf("%s[%d]: empty", path, i)
		}
		if err := validateConstraint(c, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// MatchConstraints tells whether a subscription with dynamic parameters
// params matches a variant with constraints c. No constraints match every
// subscription. A single constraint with a value matches when params has
// the key with exactly that value; one with exists when params has the key,
// whatever its value. An and-list matches when each of its constraints does
// (an empty one always), an or-list when one does (an empty one never), not
// when its constraint does not. c must have passed ValidateConstraints; a
// malformed node matches nothing.
func MatchConstraints(c *discoveryv3.DynamicParameterConstraints, params map[string]string) bool {
	if c == nil || c.GetType() == nil {
		return true
	}
	return match(c, params, 0)
}

func match(c *discoveryv3.DynamicParameterConstraints, params map[string]string, depth int) bool {
	if depth >= maxConstraintDepth {
		return false
	}
	switch t := c.GetType().(type) {
	case *discoveryv3.DynamicParameterConstraints_Constraint:
		v, ok := params[t.Constraint.GetKey()]
		switch ct := t.Constraint.GetConstraintType().(type) {
		case *discoveryv3.DynamicParameterConstraints_SingleConstraint_Value:
			return ok && v == ct.Value
		case *discoveryv3.DynamicParameterConstraints_SingleConstraint_Exists_:
			return ok
		}
		return false
	case *discoveryv3.DynamicParameterConstraints_OrConstraints:
		for _, sub := range t.OrConstraints.GetConstraints() {
			if sub != nil && match(sub, params, depth+1) {
				return true
			}
		}
		return false
	case *discoveryv3.DynamicParameterConstraints_AndConstraints:
		for _, sub := range t.AndConstraints.GetConstraints() {
			if sub == nil || !match(sub, params, depth+1) {
				return false
			}
		}
		return true
	case *discoveryv3.DynamicParameterConstraints_NotConstraints:
		return t.NotConstraints != nil && t.NotConstraints.GetType() != nil && !match(t.NotConstraints, params, depth+1)
	}
	return false
}

// ConstraintsString renders constraints for errors and logs: env="prod",
// exists(env), and(…), or(…), not(…); "none" for no constraints.
func ConstraintsString(c *discoveryv3.DynamicParameterConstraints) string {
	if c == nil || c.GetType() == nil {
		return "none"
	}
	var b strings.Builder
	writeConstraint(&b, c, 0)
	return b.String()
}

func writeConstraint(b *strings.Builder, c *discoveryv3.DynamicParameterConstraints, depth int) {
	if depth >= maxConstraintDepth {
		b.WriteString("…")
		return
	}
	list := func(op string, l *discoveryv3.DynamicParameterConstraints_ConstraintList) {
		b.WriteString(op)
		b.WriteByte('(')
		for i, sub := range l.GetConstraints() {
			if i > 0 {
				b.WriteString(", ")
			}
			writeConstraint(b, sub, depth+1)
		}
		b.WriteByte(')')
	}
	switch t := c.GetType().(type) {
	case *discoveryv3.DynamicParameterConstraints_Constraint:
		switch ct := t.Constraint.GetConstraintType().(type) {
		case *discoveryv3.DynamicParameterConstraints_SingleConstraint_Value:
			fmt.Fprintf(b, "%s=%q", t.Constraint.GetKey(), ct.Value)
		case *discoveryv3.DynamicParameterConstraints_SingleConstraint_Exists_:
			fmt.Fprintf(b, "exists(%s)", t.Constraint.GetKey())
		default:
			fmt.Fprintf(b, "%s?", t.Constraint.GetKey())
		}
	case *discoveryv3.DynamicParameterConstraints_OrConstraints:
		list("or", t.OrConstraints)
	case *discoveryv3.DynamicParameterConstraints_AndConstraints:
		list("and", t.AndConstraints)
	case *discoveryv3.DynamicParameterConstraints_NotConstraints:
		b.WriteString("not(")
		writeConstraint(b, t.NotConstraints, depth+1)
		b.WriteByte(')')
	default:
		b.WriteString("?")
	}
}
