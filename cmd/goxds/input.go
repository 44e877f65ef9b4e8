package main

import (
	"bytes"
	"fmt"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// resourceWrapperURL is the type URL of discovery.v3.Resource, the wrapper
// a resource may come in.
const resourceWrapperURL = "type.googleapis.com/envoy.service.discovery.v3.Resource"

// readInput reads a file given to validate, data being its content and
// path its name (whose extension may say the format): with typeURL set,
// one bare resource of that type; else a DiscoveryResponse, or one
// resource in an Any. The formats and how they are told apart are
// transport.DecodeFile's, so that the tool reads files exactly as a
// FILESYSTEM server's are read. The response returned has its type_url set
// and at least one resource; format is the format read.
func readInput(path string, data []byte, typeURL string) (resp *discoveryv3.DiscoveryResponse, format string, err error) {
	if typeURL != "" {
		mt, err := protoregistry.GlobalTypes.FindMessageByURL(typeURL)
		if err != nil {
			return nil, "", fmt.Errorf("no message of type %s is known: %w", typeURL, err)
		}
		msg := mt.New().Interface()
		format, err := transport.DecodeFile(path, data, msg)
		if err != nil {
			return nil, format, err
		}
		a, err := anypb.New(msg)
		if err != nil {
			return nil, format, err
		}
		return &discoveryv3.DiscoveryResponse{TypeUrl: typeURL, Resources: []*anypb.Any{a}}, format, nil
	}
	resp = &discoveryv3.DiscoveryResponse{}
	format, respErr := transport.DecodeFile(path, data, resp)
	if respErr != nil {
		one := &anypb.Any{}
		anyFormat, anyErr := transport.DecodeFile(path, data, one)
		switch {
		case anyErr == nil && one.GetTypeUrl() != "":
			resp = &discoveryv3.DiscoveryResponse{Resources: []*anypb.Any{one}}
			format = anyFormat
		case looksLikeOneResource(data):
			return nil, anyFormat, fmt.Errorf("one resource with its type: %w", anyErr)
		default:
			return nil, format, fmt.Errorf("%w (one resource alone needs its \"@type\", or -type)", respErr)
		}
	}
	if len(resp.GetResources()) == 0 {
		return nil, format, fmt.Errorf("the %s holds no resources", format)
	}
	if resp.GetTypeUrl() == "" {
		t, err := bodyType(resp.GetResources()[0])
		if err != nil {
			return nil, format, fmt.Errorf("the response has no type_url, and its first resource does not say its type: %w", err)
		}
		resp.TypeUrl = t
	}
	return resp, format, nil
}

// looksLikeOneResource tells whether data, which is neither a
// DiscoveryResponse nor a readable Any, was meant as an Any: it names a
// type as JSON and YAML ("@type") or proto text ("[type.googleapis.com/")
// write one. Its error is then the one worth showing.
func looksLikeOneResource(data []byte) bool {
	return bytes.Contains(data, []byte("@type")) || bytes.HasPrefix(bytes.TrimSpace(data), []byte("["))
}

// bodyType is the type of the resource in a, unwrapped from
// discovery.v3.Resource if need be.
func bodyType(a *anypb.Any) (string, error) {
	if a.GetTypeUrl() != resourceWrapperURL {
		if a.GetTypeUrl() == "" {
			return "", fmt.Errorf("a resource has no type_url")
		}
		return a.GetTypeUrl(), nil
	}
	env, err := resources.Unwrap(a)
	if err != nil {
		return "", err
	}
	if env.Body.GetTypeUrl() == "" {
		return "", fmt.Errorf("resource %q is wrapped without a body", env.Name)
	}
	return env.Body.GetTypeUrl(), nil
}

// typeAliases are the short names -type takes besides type names and URLs.
var typeAliases = map[string]string{
	"lds": resources.ListenerType.TypeURL(), "listener": resources.ListenerType.TypeURL(), "listeners": resources.ListenerType.TypeURL(),
	"rds": resources.RouteConfigType.TypeURL(), "route": resources.RouteConfigType.TypeURL(), "routes": resources.RouteConfigType.TypeURL(),
	"routeconfig": resources.RouteConfigType.TypeURL(), "routeconfiguration": resources.RouteConfigType.TypeURL(),
	"cds": resources.ClusterType.TypeURL(), "cluster": resources.ClusterType.TypeURL(), "clusters": resources.ClusterType.TypeURL(),
	"eds": resources.EndpointsType.TypeURL(), "endpoint": resources.EndpointsType.TypeURL(), "endpoints": resources.EndpointsType.TypeURL(),
	"cla": resources.EndpointsType.TypeURL(), "clusterloadassignment": resources.EndpointsType.TypeURL(),
}

// typeFromFlag turns -type's value into the type URL of a registered
// resource type: a short name (listener, route, cluster, endpoints; lds,
// rds, cds, eds), a type's name, its message's full name or its URL.
func typeFromFlag(s string) (string, error) {
	if u, ok := typeAliases[strings.ToLower(s)]; ok {
		return u, nil
	}
	var names []string
	for _, t := range resources.Registered() {
		full := strings.TrimPrefix(t.TypeURL(), "type.googleapis.com/")
		if s == t.TypeURL() || s == full || strings.EqualFold(s, t.TypeName()) {
			return t.TypeURL(), nil
		}
		names = append(names, t.TypeName())
	}
	return "", fmt.Errorf("-type %q: not a resource type goxds decodes (listener, route, cluster, endpoints, or one of %s, or a type URL)", s, strings.Join(names, ", "))
}
