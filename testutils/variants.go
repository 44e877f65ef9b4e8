package testutils

import (
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// Builders for variants of a resource (dynamic parameters): a server's
// resources named by resource_name with constraints, for tests of clients
// that watch with dynamic parameters.

// WrapVariant is WrapResource for a variant: the resource names itself
// with resource_name (name and constraints c) instead of name. A nil c
// names the variant without constraints.
func WrapVariant(name, version string, c *discoveryv3.DynamicParameterConstraints, msg proto.Message) *discoveryv3.Resource {
	r := WrapResource("", version, 0, msg)
	r.ResourceName = &discoveryv3.ResourceName{Name: name, DynamicParameterConstraints: c}
	return r
}

// ConstraintValue matches a subscription whose parameter key is value.
func ConstraintValue(key, value string) *discoveryv3.DynamicParameterConstraints {
	return &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_Constraint{
		Constraint: &discoveryv3.DynamicParameterConstraints_SingleConstraint{
			Key: key, ConstraintType: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Value{Value: value}}}}
}

// ConstraintExists matches a subscription that has the parameter key.
func ConstraintExists(key string) *discoveryv3.DynamicParameterConstraints {
	return &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_Constraint{
		Constraint: &discoveryv3.DynamicParameterConstraints_SingleConstraint{
			Key: key, ConstraintType: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Exists_{
				Exists: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Exists{}}}}}
}

// ConstraintAnd matches when every one of cs does.
func ConstraintAnd(cs ...*discoveryv3.DynamicParameterConstraints) *discoveryv3.DynamicParameterConstraints {
	return &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_AndConstraints{
		AndConstraints: &discoveryv3.DynamicParameterConstraints_ConstraintList{Constraints: cs}}}
}

// ConstraintOr matches when one of cs does.
func ConstraintOr(cs ...*discoveryv3.DynamicParameterConstraints) *discoveryv3.DynamicParameterConstraints {
	return &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_OrConstraints{
		OrConstraints: &discoveryv3.DynamicParameterConstraints_ConstraintList{Constraints: cs}}}
}

// ConstraintNot matches when c does not.
func ConstraintNot(c *discoveryv3.DynamicParameterConstraints) *discoveryv3.DynamicParameterConstraints {
	return &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_NotConstraints{NotConstraints: c}}
}
