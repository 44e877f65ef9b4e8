package resources

import (
	"sort"
	"strings"
	"testing"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// saveRegistry restores the registry's contents when t ends.
func saveRegistry(t *testing.T) {
	saved := defaultRegistry.Clone()
	t.Cleanup(func() {
		defaultRegistry.mu.Lock()
		defaultRegistry.types = saved.types
		defaultRegistry.mu.Unlock()
	})
}

// opaque is a resource type for registry tests.
type opaque struct{ name string }

func (o *opaque) ResourceName() string { return o.name }
func (o *opaque) Proto() proto.Message { return nil }

func opaqueType(url string) *Type[*opaque] {
	return NewType(TypeOptions[*opaque]{
		TypeURL: url,
		Decode: func(*DecodeContext, *anypb.Any) (string, *opaque, error) {
			return "x", &opaque{name: "x"}, nil
		},
	})
}

func TestBuiltinsRegistered(t *testing.T) {
	tests := []struct {
		typ         AnyType
		url, name   string
		allRequired bool
		wildcard    bool
		deltaOnly   bool
		msg         proto.Message
	}{
		{ListenerType, ListenerTypeURL, "Listener", true, true, false, &listenerv3.Listener{}},
		{RouteConfigType, RouteConfigTypeURL, "RouteConfiguration", false, false, false, &routev3.RouteConfiguration{}},
		{ClusterType, ClusterTypeURL, "Cluster", true, true, false, &clusterv3.Cluster{}},
		{EndpointsType, EndpointsTypeURL, "ClusterLoadAssignment", false, false, false, &endpointv3.ClusterLoadAssignment{}},
		{SecretType, SecretTypeURL, "Secret", false, false, false, &tlsv3.Secret{}},
		{RuntimeType, RuntimeTypeURL, "Runtime", false, false, false, &runtimev3.Runtime{}},
		{ScopedRouteConfigType, ScopedRouteConfigTypeURL, "ScopedRouteConfiguration", false, false, false, &routev3.ScopedRouteConfiguration{}},
		{VirtualHostType, VirtualHostTypeURL, "VirtualHost", false, false, true, &routev3.VirtualHost{}},
	}
	for _, tt := range tests {
		got, ok := Lookup(tt.url)
		if !ok || got != tt.typ {
			t.Errorf("Lookup(%s) = %v, %v; want the built-in type", tt.url, got, ok)
		}
		if tt.typ.TypeURL() != tt.url || tt.typ.TypeName() != tt.name || tt.typ.DeltaOnly() != tt.deltaOnly ||
			tt.typ.AllResourcesRequiredInSotW() != tt.allRequired || tt.typ.SupportsWildcard() != tt.wildcard {
			t.Errorf("%s: flags or names wrong", tt.url)
		}
		if a := toAny(tt.msg); a.GetTypeUrl() != tt.url {
			t.Errorf("constant %s, message packs as %s", tt.url, a.GetTypeUrl())
		}
	}
	// Names compared against embedded Any type URLs.
	for name, m := range map[string]proto.Message{
		hcmName:             &hcmv3.HttpConnectionManager{},
		routerName:          &routerv3.Router{},
		udpaStructName:      &udpatypev1.TypedStruct{},
		aggregateConfigName: &aggregatev3.ClusterConfig{},
		upstreamTLSName:     &tlsv3.UpstreamTlsContext{},
	} {
		if got := string(m.ProtoReflect().Descriptor().FullName()); got != name {
			t.Errorf("constant %q, message %q", name, got)
		}
	}
}

func TestRegister(t *testing.T) {
	saveRegistry(t)
	const url = "type.googleapis.com/test.Opaque"
	typ := opaqueType(url)
	if err := Register(typ); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if got, ok := Lookup(url); !ok || got != typ {
		t.Errorf("Lookup after Register = %v, %v", got, ok)
	}
	err := Register(opaqueType(url))
	if err == nil || !strings.Contains(err.Error(), "already registered for "+url) {
		t.Errorf("second Register = %v, want an already-registered error", err)
	}
	if got, _ := Lookup(url); got != typ {
		t.Error("a failed Register replaced the type")
	}
	if err := Register(opaqueType(ListenerTypeURL)); err == nil {
		t.Error("Register over a built-in type succeeded")
	}
	if _, ok := Lookup("type.googleapis.com/test.Missing"); ok {
		t.Error("Lookup of an unregistered URL succeeded")
	}
}

func TestReplace(t *testing.T) {
	saveRegistry(t)
	mine := opaqueType(ListenerTypeURL)
	Replace(mine)
	if got, _ := Lookup(ListenerTypeURL); got != mine {
		t.Errorf("Lookup after Replace = %v", got)
	}
	const url = "type.googleapis.com/test.New"
	fresh := opaqueType(url)
	Replace(fresh)
	if got, _ := Lookup(url); got != fresh {
		t.Error("Replace of an unregistered URL did not register it")
	}
}

func TestRegistered(t *testing.T) {
	saveRegistry(t)
	for _, url := range []string{"type.googleapis.com/zzz.Last", "type.googleapis.com/aaa.First"} {
		if err := Register(opaqueType(url)); err != nil {
			t.Fatal(err)
		}
	}
	all := Registered()
	urls := make([]string, len(all))
	for i, typ := range all {
		urls[i] = typ.TypeURL()
	}
	if !sort.StringsAreSorted(urls) {
		t.Errorf("Registered is not sorted by type URL: %v", urls)
	}
	for _, want := range []string{
		"type.googleapis.com/aaa.First", "type.googleapis.com/zzz.Last", ListenerTypeURL, RouteConfigTypeURL, ClusterTypeURL,
		EndpointsTypeURL, SecretTypeURL, RuntimeTypeURL, ScopedRouteConfigTypeURL, VirtualHostTypeURL,
	} {
		if i := sort.SearchStrings(urls, want); i == len(urls) || urls[i] != want {
			t.Errorf("Registered lacks %s: %v", want, urls)
		}
	}
}

func TestMustRegisterPanicsOnDuplicate(t *testing.T) {
	saveRegistry(t)
	defer func() {
		if recover() == nil {
			t.Error("mustRegister of a duplicate did not panic")
		}
	}()
	mustRegister(opaqueType(ClusterTypeURL))
}

func TestNewTypeDefaultsAndPanics(t *testing.T) {
	if got := opaqueType("type.googleapis.com/a.b.Thing").TypeName(); got != "Thing" {
		t.Errorf("TypeName = %q, want Thing", got)
	}
	if got := opaqueType("Thing2").TypeName(); got != "Thing2" {
		t.Errorf("TypeName = %q, want Thing2", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewType without a decoder did not panic")
		}
	}()
	NewType(TypeOptions[*opaque]{TypeURL: "x"})
}

func TestDecodeNilBody(t *testing.T) {
	for _, typ := range []AnyType{
		ListenerType, RouteConfigType, ClusterType, EndpointsType,
		SecretType, RuntimeType, ScopedRouteConfigType, VirtualHostType,
	} {
		if _, v, err := typ.Decode(nil, nil); err == nil || v != nil {
			t.Errorf("%s.Decode(nil) = %v, %v", typ.TypeName(), v, err)
		}
	}
}
