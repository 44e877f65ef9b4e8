package resources

import (
	"errors"
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// ScopedRouteConfigType is the built-in SRDS type: ScopedRouteConfiguration
// resources, decoded into *ScopedRouteConfig.
//
// The protocol text is silent on SRDS in particular but says that in SotW
// only Listener and Cluster responses hold the whole state of the world,
// every other type being grouped as in delta, and that only those two have
// a wildcard (the discovery proto: only LDS and CDS may send an empty name
// list). This type follows the text: a SotW response may carry some scopes,
// one missing from a response is not deleted, and scopes are subscribed to
// by name. Envoy, as a client, does otherwise: it subscribes to SRDS with
// an empty name list and treats each SotW response as complete. A client
// that must talk to a server written for Envoy can Replace this type with
// one that sets AllResourcesRequiredInSotW and SupportsWildcard.
var ScopedRouteConfigType = NewType(TypeOptions[*ScopedRouteConfig]{
	TypeURL: ScopedRouteConfigTypeURL,
	Decode:  decodeScopedRouteConfig,
})

// ScopedRouteConfig is a validated ScopedRouteConfiguration: a routing
// scope, which maps a key to a route configuration. Like every decoded
// value it is immutable and shared: callers must not modify it.
type ScopedRouteConfig struct {
	// Name is the resource name (the scope's name).
	Name string
	// RouteConfigName is the RouteConfiguration to fetch over RDS; empty
	// when the route configuration is inline.
	RouteConfigName string
	// InlineRouteConfig is the route configuration carried inline; nil
	// when RouteConfigName is set.
	InlineRouteConfig *RouteConfig
	// Key is the scope's key: the string_key of each fragment in order
	// (never empty). A request is in the scope when the fragments its
	// connection manager's scope_key_builder extracts are equal to these.
	Key []string
	// OnDemand asks for the route configuration to be fetched only when a
	// request first falls in the scope.
	OnDemand bool
	// Raw is the message as received.
	Raw *routev3.ScopedRouteConfiguration
}

// ResourceName implements Resource.
func (s *ScopedRouteConfig) ResourceName() string {
	if s == nil {
		return ""
	}
	return s.Name
}

// Proto implements Resource; it returns Raw.
func (s *ScopedRouteConfig) Proto() proto.Message { return s.Raw }

func decodeScopedRouteConfig(ctx *DecodeContext, body *anypb.Any) (string, *ScopedRouteConfig, error) {
	m := new(routev3.ScopedRouteConfiguration)
	if err := proto.Unmarshal(body.GetValue(), m); err != nil {
		return "", nil, fmt.Errorf("unmarshal ScopedRouteConfiguration: %v", err)
	}
	name := m.GetName()
	if name == "" {
		return "", nil, fieldErrorf("name", "must not be empty")
	}
	s := &ScopedRouteConfig{Name: name, OnDemand: m.GetOnDemand(), Raw: m}
	if err := s.init(ctx, m); err != nil {
		return name, nil, err
	}
	return name, s, nil
}

// init checks the route configuration, named or inline but not both (Envoy
// takes the name from SRDS and refuses it in inline scopes, so a scope with
// both is ambiguous), and the key.
func (s *ScopedRouteConfig) init(ctx *DecodeContext, m *routev3.ScopedRouteConfiguration) error {
	switch inline := m.GetRouteConfiguration(); {
	case inline != nil && m.GetRouteConfigurationName() != "":
		return fieldErrorf("route_configuration", "set with route_configuration_name (want one of them)")
	case inline != nil:
		rc, err := newRouteConfig(ctx, inline, nil)
		if err != nil {
			return at("route_configuration", err)
		}
		s.InlineRouteConfig = rc
	case m.GetRouteConfigurationName() == "":
		return fieldErrorf("route_configuration_name", "must not be empty (or give an inline route_configuration)")
	default:
		s.RouteConfigName = m.GetRouteConfigurationName()
	}
	key, err := scopeKey(m.GetKey())
	if err != nil {
		return at("key", err)
	}
	s.Key = key
	return nil
}

// scopeKey returns the string keys of a scope key's fragments. A fragment
// may be the empty string: a header element can be empty too.
func scopeKey(k *routev3.ScopedRouteConfiguration_Key) ([]string, error) {
	if k == nil {
		return nil, errors.New("missing")
	}
	frags := k.GetFragments()
	if len(frags) == 0 {
		return nil, fieldErrorf("fragments", "must not be empty")
	}
	key := make([]string, len(frags))
	for i, f := range frags {
		switch t := f.GetType().(type) {
		case *routev3.ScopedRouteConfiguration_Key_Fragment_StringKey:
			key[i] = t.StringKey
		case nil:
			return nil, fieldErrorf(index("fragments", i), "no string_key")
		default:
			return nil, fieldErrorf(index("fragments", i), "unsupported fragment type %T", t)
		}
	}
	return key, nil
}
