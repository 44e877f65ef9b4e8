package xdsserver_test

import (
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// A filter type registered for servers that this package has no code for
// is skipped when the Listener marks it optional (gRFC A39: an optional
// filter that is not supported is ignored), and fails every RPC with
// UNAVAILABLE naming the listener and the filter when it is required (it
// may be a security filter).
func TestServerFilterWithoutRuntime(t *testing.T) {
	const url = "type.googleapis.com/goxds.test.ServerOnly"
	for _, optional := range []bool{false, true} {
		t.Run(map[bool]string{false: "required", true: "optional"}[optional], func(t *testing.T) {
			reg := resources.DefaultRegistry().Clone()
			if err := reg.RegisterHTTPFilter(resources.HTTPFilterType{
				Name: "server-only", TypeURLs: []string{url}, ServerSide: true,
				ParseConfig: func(*anypb.Any) (resources.HTTPFilterConfig, error) { return struct{}{}, nil },
			}); err != nil {
				t.Fatal(err)
			}
			e := newEnvOpts(t, envOptions{server: func(e *env, cfg *bootstrap.Config) []grpc.ServerOption {
				co := quietClient
				co.Registry = reg
				return append(e.defaultOptions(cfg), xdsserver.ClientOptions(co))
			}})
			f := &hcmv3.HttpFilter{Name: "odd", IsOptional: optional, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: url}}}
			e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, serverRoutes(), f)}})
			e.waitMode(xdsserver.ServingModeServing)
			err := call(e.ctx, e.dial(), sayHello)
			if optional {
				if err != nil {
					t.Fatalf("%s with an optional filter it cannot run: %v, want it served", sayHello, err)
				}
				return
			}
			want := `listener "` + e.name + `": HTTP filter "odd" of type ` + url + ` has no server implementation`
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %v, want UNAVAILABLE containing %q", sayHello, err, want)
			}
		})
	}
}
