package resources

import (
	"fmt"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// VirtualHostType is the built-in VHDS type: VirtualHost resources, which
// add virtual hosts to a route configuration on demand, decoded into
// *VirtualHostResource. VHDS exists only in the delta protocol.
var VirtualHostType = NewType(TypeOptions[*VirtualHostResource]{
	TypeURL:   VirtualHostTypeURL,
	DeltaOnly: true,
	Decode:    decodeVirtualHost,
})

// VirtualHostResource is a validated VHDS resource: a virtual host, checked
// by the same rules as those inside a RouteConfiguration. Like every
// decoded value it is immutable and shared: callers must not modify it.
type VirtualHostResource struct {
	// Name is the resource name, the virtual host's name. By the VHDS
	// naming convention it is "<route configuration name>/<host>".
	Name string
	// VirtualHost is the validated virtual host, as it would be in a
	// RouteConfig: FindVirtualHost and the route matchers work on it.
	VirtualHost *VirtualHost
}

// ResourceName implements Resource.
func (v *VirtualHostResource) ResourceName() string {
	if v == nil {
		return ""
	}
	return v.Name
}

// Raw returns the message as received, unmarshalled anew on each call (it
// is VirtualHost.Raw); nil for a value not made by the decoder.
func (v *VirtualHostResource) Raw() *routev3.VirtualHost {
	if v == nil {
		return nil
	}
	return v.VirtualHost.Raw()
}

// Proto implements Resource; it returns Raw.
func (v *VirtualHostResource) Proto() proto.Message { return v.Raw() }

// RouteConfigName returns the route configuration the virtual host belongs
// to by the VHDS naming convention: Name up to its last '/' (a host cannot
// hold a '/', a route configuration name can). It is "" for a name without
// a '/'.
func (v *VirtualHostResource) RouteConfigName() string {
	i := strings.LastIndexByte(v.Name, '/')
	if i < 0 {
		return ""
	}
	return v.Name[:i]
}

// decodeVirtualHost requires the name that a virtual host inside a route
// configuration may leave out: here it is the resource name.
func decodeVirtualHost(ctx *DecodeContext, body *anypb.Any) (string, *VirtualHostResource, error) {
	m := new(routev3.VirtualHost)
	if err := proto.Unmarshal(body.GetValue(), m); err != nil {
		return "", nil, fmt.Errorf("unmarshal VirtualHost: %v", err)
	}
	name := m.GetName()
	if name == "" {
		return "", nil, fieldErrorf("name", "must not be empty")
	}
	vh, err := newVirtualHost(ctx, m, body.GetValue(), nil)
	if err != nil {
		return name, nil, err
	}
	return name, &VirtualHostResource{Name: name, VirtualHost: vh}, nil
}
