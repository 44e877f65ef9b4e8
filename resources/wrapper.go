package resources

import (
	"errors"
	"fmt"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Envelope is one resource as it arrived on the wire, with the metadata that
// discovery.v3.Resource carries when the server wrapped it. Delta responses
// always carry envelopes; SotW responses may carry plain bodies or wrapped
// ones (the wrapper is how SotW carries a TTL).
type Envelope struct {
	// Wrapped reports whether the resource came in a discovery.v3.Resource.
	// When false only Body is set.
	Wrapped bool
	// Name is the wrapper's name (or resource_name.name); empty for a plain
	// body, whose name is only known once decoded.
	Name string
	// Version is the wrapper's per-resource version.
	Version string
	// Constraints are the dynamic parameter constraints of the variant the
	// wrapper names with resource_name; nil for a resource named by name
	// (or by a resource_name without constraints), which matches every
	// subscription of its name. See MatchConstraints.
	Constraints *discoveryv3.DynamicParameterConstraints
	// Aliases are the wrapper's aliases (VHDS).
	Aliases []string
	// TTL is the wrapper's ttl; HasTTL tells a zero TTL from none.
	TTL    time.Duration
	HasTTL bool
	// Body is the resource itself. A wrapped resource without a body is a
	// heartbeat: it refreshes the TTL of the version the client holds.
	Body *anypb.Any
}

// IsHeartbeat reports whether the envelope is a TTL refresh with no body.
func (e *Envelope) IsHeartbeat() bool { return e.Wrapped && e.Body == nil }

// Unwrap returns the envelope of a SotW resource: if a is a
// discovery.v3.Resource it is unwrapped, otherwise a is the body itself.
func Unwrap(a *anypb.Any) (Envelope, error) {
	if a == nil {
		return Envelope{}, errors.New("empty resource")
	}
	if a.GetTypeUrl() != WrapperTypeURL {
		return Envelope{Body: a}, nil
	}
	var r discoveryv3.Resource
	if err := proto.Unmarshal(a.GetValue(), &r); err != nil {
		return Envelope{}, fmt.Errorf("unmarshal discovery.v3.Resource wrapper: %w", err)
	}
	env, err := FromResource(&r)
	if err != nil {
		return Envelope{}, err
	}
	if env.Body != nil && env.Body.GetTypeUrl() == WrapperTypeURL {
		// A wrapper inside a wrapper is not a thing the protocol allows, and
		// following it would let a server nest without bound.
		return Envelope{}, fmt.Errorf("resource %q: a discovery.v3.Resource wrapper may not wrap another", env.Name)
	}
	return env, nil
}

// FromResource returns the envelope of a discovery.v3.Resource as delta
// responses carry them.
func FromResource(r *discoveryv3.Resource) (Envelope, error) {
	if r == nil {
		return Envelope{}, errors.New("empty resource")
	}
	env := Envelope{
		Wrapped: true,
		Name:    r.GetName(),
		Version: r.GetVersion(),
		Aliases: r.GetAliases(),
		Body:    r.GetResource(),
	}
	if rn := r.GetResourceName(); rn != nil {
		if env.Name != "" {
			return Envelope{}, fmt.Errorf("resource %q: both name and resource_name (%q) are set; only one may be", env.Name, rn.GetName())
		}
		env.Name = rn.GetName()
		if c := rn.GetDynamicParameterConstraints(); c.GetType() != nil {
			if err := ValidateConstraints(c); err != nil {
				return Envelope{}, fmt.Errorf("resource %q: dynamic parameter %w", env.Name, err)
			}
			env.Constraints = c
		}
	}
	if ttl := r.GetTtl(); ttl != nil {
		if err := ttl.CheckValid(); err != nil {
			return Envelope{}, fmt.Errorf("resource %q: ttl: %w", env.Name, err)
		}
		d := ttl.AsDuration()
		if d <= 0 {
			return Envelope{}, fmt.Errorf("resource %q: ttl must be positive, got %v", env.Name, d)
		}
		env.TTL, env.HasTTL = d, true
	}
	return env, nil
}
