package resources_test

import (
	"errors"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	"github.com/goxds/xds/resources"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// ExtensionConfigTypeURL is the type URL of ECDS resources, a type this
// package does not build in.
const ExtensionConfigTypeURL = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"

// ExtensionConfig is a validated ECDS resource: the Go value of a custom
// type.
type ExtensionConfig struct {
	Name string
	// Config is the extension's configuration.
	Config *anypb.Any
	Raw    *corev3.TypedExtensionConfig
}

// ResourceName and Proto make *ExtensionConfig a resources.Resource.
func (e *ExtensionConfig) ResourceName() string { return e.Name }
func (e *ExtensionConfig) Proto() proto.Message { return e.Raw }

// ExtensionConfigType is the type a client uses to watch extension configs.
var ExtensionConfigType = resources.NewType(resources.TypeOptions[*ExtensionConfig]{
	TypeURL: ExtensionConfigTypeURL,
	Decode:  decodeExtensionConfig,
})

// decodeExtensionConfig accepts only configs with a typed_config. It
// returns the name as soon as it knows it, so that a failure is reported
// against the right resource. Its rules do not depend on which server sent
// the config, so it ignores the DecodeContext.
func decodeExtensionConfig(_ *resources.DecodeContext, body *anypb.Any) (string, *ExtensionConfig, error) {
	m := new(corev3.TypedExtensionConfig)
	if err := proto.Unmarshal(body.GetValue(), m); err != nil {
		return "", nil, fmt.Errorf("unmarshal TypedExtensionConfig: %v", err)
	}
	if m.GetName() == "" {
		return "", nil, errors.New("name: must not be empty")
	}
	if m.GetTypedConfig().GetTypeUrl() == "" {
		return m.GetName(), nil, errors.New("typed_config: want a config")
	}
	return m.GetName(), &ExtensionConfig{Name: m.GetName(), Config: m.GetTypedConfig(), Raw: m}, nil
}

// Register the type before creating clients; an init function is the usual
// place. Register refuses a second type for the same URL.
func init() {
	if err := resources.Register(ExtensionConfigType); err != nil {
		panic(err)
	}
}

// A client finds the type by its URL and decodes what the server sent.
func Example_customType() {
	cfg, _ := anypb.New(&routerv3.Router{})
	good, _ := anypb.New(&corev3.TypedExtensionConfig{Name: "router", TypedConfig: cfg})
	bad, _ := anypb.New(&corev3.TypedExtensionConfig{Name: "empty"})

	typ, ok := resources.Lookup(good.GetTypeUrl())
	fmt.Println("registered:", ok, typ.TypeName())

	// A client passes the context of the server that sent the resource;
	// outside a client, nil.
	name, v, err := typ.Decode(nil, good)
	fmt.Println(name, v.(*ExtensionConfig).Config.GetTypeUrl(), err)

	// The typed form skips the type assertion.
	name, _, err = ExtensionConfigType.DecodeTyped(nil, bad)
	fmt.Println(name, err)
	// Output:
	// registered: true TypedExtensionConfig
	// router type.googleapis.com/envoy.extensions.filters.http.router.v3.Router <nil>
	// empty TypedExtensionConfig "empty": typed_config: want a config
}
