package resources

import (
	"encoding/json"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
)

// bootstrapWith is a bootstrap whose certificate_providers defines the
// named instances (file_watcher), and "unregistered" with a plugin grpc-go
// does not have, which gRPC counts as undefined.
func bootstrapWith(instances ...string) *bootstrap.Config {
	b := &bootstrap.Config{CertificateProviders: map[string]bootstrap.CertificateProvider{
		"unregistered": {PluginName: "no_such_plugin", Config: json.RawMessage(`{}`)},
	}}
	for _, n := range instances {
		b.CertificateProviders[n] = bootstrap.CertificateProvider{PluginName: "file_watcher", Config: json.RawMessage(`{"ca_certificate_file":"/ca.pem"}`)}
	}
	return b
}

// mtlsCluster takes its identity from instance id and its roots from
// instance roots.
func mtlsCluster(id, roots string) *clusterv3.Cluster {
	c := edsCluster("c", "")
	u := upstreamTLS("")
	u.CommonTlsContext.TlsCertificateProviderInstance = provider(id, "")
	u.CommonTlsContext.GetValidationContext().CaCertificateProviderInstance = provider(roots, "")
	c.TransportSocket = tlsSocket(u)
	return c
}

// mtlsServerListener's chain has its identity from instance id and its
// roots from instance roots.
func mtlsServerListener(id, roots string) *listenerv3.Listener {
	common := &tlsv3.CommonTlsContext{
		TlsCertificateProviderInstance: provider(id, ""),
		ValidationContextType:          validationContext(&tlsv3.CertificateValidationContext{CaCertificateProviderInstance: provider(roots, "")}),
	}
	l := serverListener(chain("c", nil))
	l.FilterChains[0].TransportSocket = downstreamSocket(&tlsv3.DownstreamTlsContext{CommonTlsContext: common, RequireClientCertificate: wrapperspb.Bool(true)})
	return l
}

// gRFC A29: a Cluster or a server Listener naming a certificate provider
// instance the bootstrap does not define is rejected, in grpc-go's words
// (identity first) and then what the bootstrap does define. Without a
// bootstrap in the context, instance names are not checked.
func TestCertificateProviderInstancesMustBeDefined(t *testing.T) {
	const (
		path = "transport_socket.typed_config.common_tls_context: "
		fcp  = "filter_chains[0]." + path
	)
	tests := []struct {
		name    string
		typ     AnyType
		msg     proto.Message
		ctx     *DecodeContext
		wantErr string
	}{
		{"cluster, no context", ClusterType, mtlsCluster("x", "y"), nil, ""},
		{"cluster, no bootstrap", ClusterType, mtlsCluster("x", "y"), &DecodeContext{}, ""},
		{"cluster, both defined", ClusterType, mtlsCluster("id", "roots"), &DecodeContext{Bootstrap: bootstrapWith("id", "roots")}, ""},
		{"cluster, identity undefined", ClusterType, mtlsCluster("x", "roots"), &DecodeContext{Bootstrap: bootstrapWith("id", "roots")},
			path + `identity certificate provider instance name "x" missing in bootstrap configuration (the bootstrap's certificate_providers defines "id", "roots")`},
		{"cluster, roots undefined", ClusterType, mtlsCluster("id", "y"), &DecodeContext{Bootstrap: bootstrapWith("id", "roots")},
			path + `root certificate provider instance name "y" missing in bootstrap configuration`},
		{"cluster, both undefined: identity named", ClusterType, mtlsCluster("x", "y"), &DecodeContext{Bootstrap: bootstrapWith()},
			path + `identity certificate provider instance name "x" missing in bootstrap configuration (the bootstrap's certificate_providers defines none)`},
		{"cluster, plugin not registered", ClusterType, mtlsCluster("unregistered", "roots"), &DecodeContext{Bootstrap: bootstrapWith("roots")},
			`identity certificate provider instance name "unregistered" missing in bootstrap configuration`},
		{"server listener, no context", ListenerType, mtlsServerListener("x", "y"), nil, ""},
		{"server listener, both defined", ListenerType, mtlsServerListener("id", "roots"), &DecodeContext{Bootstrap: bootstrapWith("id", "roots")}, ""},
		{"server listener, identity undefined", ListenerType, mtlsServerListener("x", "roots"), &DecodeContext{Bootstrap: bootstrapWith("roots")},
			fcp + `identity certificate provider instance name "x" missing in bootstrap configuration (the bootstrap's certificate_providers defines "roots")`},
		{"server listener, roots undefined", ListenerType, mtlsServerListener("id", "y"), &DecodeContext{Bootstrap: bootstrapWith("id")},
			fcp + `root certificate provider instance name "y" missing in bootstrap configuration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, v, err := tt.typ.Decode(tt.ctx, toAny(tt.msg))
			checkErr(t, err, tt.wantErr)
			if (err == nil) != (v != nil) {
				t.Fatalf("Decode = %v, %v: want a value exactly when there is no error", v, err)
			}
		})
	}
}

// lrs_server "self" names the server of the context (Cluster.LRSServer),
// and such a cluster says it depends on its source; without a server in
// the context, or without lrs_server, it names none.
func TestClusterLRSServerIsTheSender(t *testing.T) {
	srv := &bootstrap.ServerConfig{ServerURI: "xds.example.com:443"}
	withLRS := edsCluster("c", "")
	withLRS.LrsServer = selfSource()
	for _, tt := range []struct {
		name      string
		c         *clusterv3.Cluster
		ctx       *DecodeContext
		want      *bootstrap.ServerConfig
		dependent bool
	}{
		{"self, from a server", withLRS, &DecodeContext{Server: srv}, srv, true},
		{"self, no server known", withLRS, nil, nil, true},
		{"no lrs_server", edsCluster("c", ""), &DecodeContext{Server: srv}, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, c, err := ClusterType.DecodeTyped(tt.ctx, toAny(tt.c))
			if err != nil {
				t.Fatal(err)
			}
			if c.LRSServer != tt.want || c.LRSServerSelf != tt.dependent || DependsOnSource(c) != tt.dependent {
				t.Fatalf("LRSServer %v, LRSServerSelf %v, DependsOnSource %v; want %v, %v, %v",
					c.LRSServer, c.LRSServerSelf, DependsOnSource(c), tt.want, tt.dependent, tt.dependent)
			}
		})
	}
}

// registryFilterURL is the config type of a filter registered only in the
// registries these tests make.
const registryFilterURL = "type.googleapis.com/google.protobuf.BoolValue"

// A registry's filters and cluster specifier plugins are what the
// listeners and route configurations decoded with it are validated
// against: a clone has what the default has, and what is added to it stays
// in it.
func TestRegistryDecidesFiltersAndPlugins(t *testing.T) {
	reg := DefaultRegistry().Clone()
	if err := reg.RegisterHTTPFilter(HTTPFilterType{
		Name:          "bool",
		TypeURLs:      []string{registryFilterURL},
		ParseConfig:   func(a *anypb.Any) (HTTPFilterConfig, error) { return "top", nil },
		ParseOverride: func(a *anypb.Any) (HTTPFilterConfig, error) { return "override", nil },
		ClientSide:    true,
	}); err != nil {
		t.Fatal(err)
	}
	const pluginURL = "type.googleapis.com/google.protobuf.Int32Value"
	if err := reg.RegisterClusterSpecifier(ClusterSpecifierType{
		Name:        "int",
		TypeURLs:    []string{pluginURL},
		ParseConfig: func(*anypb.Any) (ClusterSpecifierConfig, error) { return "plugin", nil },
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := LookupHTTPFilter(registryFilterURL); ok {
		t.Fatal("a filter registered into a clone is in the default registry")
	}
	if _, ok := reg.LookupHTTPFilter(routerName); !ok {
		t.Fatal("the clone lacks the default registry's router")
	}
	if _, ok := reg.LookupClusterSpecifier(pluginURL); !ok {
		t.Fatal("the clone lacks the plugin registered into it")
	}

	rc := simpleRouteConfig("r", "c")
	rc.VirtualHosts[0].TypedPerFilterConfig = map[string]*anypb.Any{"b": toAny(wrapperspb.Bool(true))}
	_, got, err := RouteConfigType.DecodeTyped(&DecodeContext{Registry: reg}, toAny(rc))
	if err != nil {
		t.Fatalf("with the filter: %v", err)
	}
	if o := got.VirtualHosts[0].FilterOverrides["b"]; o != "override" {
		t.Fatalf("override parsed as %#v", o)
	}
	_, _, err = RouteConfigType.DecodeTyped(nil, toAny(rc))
	checkErr(t, err, `override for filter "b" has unknown type google.protobuf.BoolValue and is not optional`)

	rc = simpleRouteConfig("r", "c")
	rc.ClusterSpecifierPlugins = []*routev3.ClusterSpecifierPlugin{plugin("p", pluginURL, false)}
	rc.VirtualHosts[0].Routes[0] = routeTo("r", "/", viaPlugin("p"))
	_, got, err = RouteConfigType.DecodeTyped(&DecodeContext{Registry: reg}, toAny(rc))
	if err != nil || got.ClusterSpecifierPlugins["p"] != "plugin" {
		t.Fatalf("with the plugin: %v, %v", got, err)
	}
	_, _, err = RouteConfigType.DecodeTyped(nil, toAny(rc))
	checkErr(t, err, `plugin "p" has unsupported type google.protobuf.Int32Value and is not optional`)

	// A Listener's filter: the type ends up in the chain, its Terminal
	// recorded from the registry's type.
	hcm := rdsHCM("r")
	hcm.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "b", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: toAny(wrapperspb.Bool(true))}}}, hcm.HttpFilters...)
	_, l, err := ListenerType.DecodeTyped(&DecodeContext{Registry: reg}, toAny(listenerWith("l", hcm)))
	if err != nil {
		t.Fatalf("listener with the filter: %v", err)
	}
	if fs := l.HTTPFilters; len(fs) != 2 || fs[0].Parsed != "top" || fs[0].Terminal || !fs[1].Terminal {
		t.Fatalf("filters %+v: want b (not terminal) then the terminal router", fs)
	}
	_, _, err = ListenerType.DecodeTyped(nil, toAny(listenerWith("l", hcm)))
	checkErr(t, err, `filter "b" has unknown type google.protobuf.BoolValue and is not optional`)
}

// BenchmarkDecodeMTLSCluster decodes a cluster with mTLS without a
// bootstrap to check its instances against, and with one: the check is two
// map lookups and two loads of the registered-plugin memo per cluster.
func BenchmarkDecodeMTLSCluster(b *testing.B) {
	body := toAny(mtlsCluster("id", "roots"))
	for _, bc := range []struct {
		name string
		ctx  *DecodeContext
	}{
		{"no-bootstrap", nil},
		{"bootstrap", &DecodeContext{Bootstrap: bootstrapWith("id", "roots")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := ClusterType.DecodeTyped(bc.ctx, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
