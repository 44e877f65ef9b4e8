package main

import (
	"fmt"
	"net"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// The frontend's routes, by path prefix.
const (
	pathSplit   = "/split"   // 90/10 between v1 and v2
	pathNoRetry = "/noretry" // the flaky cluster (bad and v1), no retry policy
	pathRetry   = "/retry"   // the flaky cluster, retry_on 5xx
	pathPool    = "/pool"    // the pool cluster (bad and v1), outlier detection
	pathSecure  = "/secure"  // the secure cluster, over mTLS
	// Anything else goes to v1.
)

// resources is what the management server serves: the frontend's
// Listener with its routes, the clusters and their endpoints, and each
// backend's server Listener.
func (m *mesh) resources() testutils.Resources {
	res := testutils.Resources{
		Listeners: []*listenerv3.Listener{frontendListener()},
	}
	for _, c := range []struct {
		name string
		bs   []*backend
	}{{"v1", []*backend{m.v1}}, {"v2", []*backend{m.v2}}, {"flaky", []*backend{m.bad, m.v1}}, {"pool", []*backend{m.bad, m.v1}}, {"secure", []*backend{m.secure}}} {
		cluster := testutils.Cluster(c.name, "")
		switch c.name {
		case "pool":
			cluster.OutlierDetection = outlierDetection()
		case "secure":
			// The frontend's certificate, the demo's CA for the
			// server's, which must name secureID.
			cluster.TransportSocket = socket(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
				TlsCertificateProviderInstance: instance("identity"),
				ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
					CaCertificateProviderInstance: instance("roots"),
					MatchSubjectAltNames:          []*matcherv3.StringMatcher{exact(secureID)},
				}},
			}})
		}
		ports := make([]uint32, len(c.bs))
		for i, b := range c.bs {
			ports[i] = b.port()
		}
		res.Clusters = append(res.Clusters, cluster)
		res.Endpoints = append(res.Endpoints, testutils.ClusterLoadAssignment(c.name, "127.0.0.1", ports...))
	}
	for _, b := range m.backends() {
		res.Listeners = append(res.Listeners, serverListener(b.lis.Addr(), b == m.secure))
	}
	return res
}

// frontendListener is the client Listener for host: the fault filter
// (aborting only requests that ask with x-envoy-fault-abort-request) and
// the routes of the scenes, each request carrying x-caller: frontend.
func frontendListener() *listenerv3.Listener {
	weighted := &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
		{Name: "v1", Weight: wrapperspb.UInt32(90)},
		{Name: "v2", Weight: wrapperspb.UInt32(10)},
	}}
	retry := &routev3.RetryPolicy{
		RetryOn:    "5xx",
		NumRetries: wrapperspb.UInt32(2),
		// A short back-off keeps the demo quick; Envoy's default base is
		// 25 ms.
		RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Millisecond)},
	}
	rc := &routev3.RouteConfiguration{
		Name: "frontend-routes",
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    "backend",
			Domains: []string{"*"},
			// The backends' RBAC allows only this caller. A header is an
			// identity anyone can claim; example/mesh shows the real one,
			// the caller's certificate over mTLS.
			RequestHeadersToAdd: []*corev3.HeaderValueOption{{
				Header:       &corev3.HeaderValue{Key: "x-caller", Value: frontendID},
				AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
			}},
			Routes: []*routev3.Route{
				route(pathSplit, &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: weighted}}),
				route(pathNoRetry, toCluster("flaky")),
				route(pathRetry, withRetry(toCluster("flaky"), retry)),
				route(pathPool, toCluster("pool")),
				route(pathSecure, toCluster("secure")),
				route("/", toCluster("v1")),
			},
		}},
	}
	l := testutils.ListenerInlineRoute(host, rc)
	// testutils' Listener has only the router filter: the fault filter
	// goes before it.
	var hcm hcmv3.HttpConnectionManager
	if err := l.GetApiListener().GetApiListener().UnmarshalTo(&hcm); err != nil {
		panic(fmt.Sprintf("the Listener testutils built does not hold an HttpConnectionManager: %v", err))
	}
	fault := &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
		ErrorType:  &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}},
		Percentage: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
	}}
	hcm.HttpFilters = append([]*hcmv3.HttpFilter{filter("fault", fault)}, hcm.HttpFilters...)
	l.ApiListener.ApiListener = testutils.MarshalAny(&hcm)
	return l
}

// outlierDetection ejects an endpoint whose failures are half its
// requests or more, once it has had 5, at each 10 s interval; success
// rate is off, since two endpoints are too few for its statistics.
func outlierDetection() *clusterv3.OutlierDetection {
	return &clusterv3.OutlierDetection{
		Interval:                       durationpb.New(outlierInterval),
		BaseEjectionTime:               durationpb.New(time.Minute),
		MaxEjectionPercent:             wrapperspb.UInt32(50),
		FailurePercentageThreshold:     wrapperspb.UInt32(50),
		EnforcingFailurePercentage:     wrapperspb.UInt32(100),
		FailurePercentageMinimumHosts:  wrapperspb.UInt32(2),
		FailurePercentageRequestVolume: wrapperspb.UInt32(5),
		EnforcingSuccessRate:           wrapperspb.UInt32(0),
	}
}

func route(prefix string, a *routev3.RouteAction) *routev3.Route {
	return &routev3.Route{
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
		Action: &routev3.Route_Route{Route: a},
	}
}

func toCluster(name string) *routev3.RouteAction {
	return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}}
}

func withRetry(a *routev3.RouteAction, p *routev3.RetryPolicy) *routev3.RouteAction {
	a.RetryPolicy = p
	return a
}

// serverListener is a backend's Listener: one filter chain, plaintext or
// (mtls) requiring a client certificate from the demo's CA, RBAC allowing
// only requests with x-caller: frontend, and a route that serves every
// path with the handler (non_forwarding_action).
func serverListener(addr net.Addr, mtls bool) *listenerv3.Listener {
	rbac := &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{
		Action: rbacv3.RBAC_ALLOW,
		Policies: map[string]*rbacv3.Policy{"frontend-only": {
			Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_Any{Any: true}}},
			Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Header{Header: &routev3.HeaderMatcher{
				Name:                 "x-caller",
				HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: exact(frontendID)},
			}}}},
		}},
	}}
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "serve-all",
			VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
			}}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{filter("rbac", rbac), filter("router", &routerv3.Router{})},
	}
	tcp := addr.(*net.TCPAddr)
	chain := &listenerv3.FilterChain{
		Name: "plaintext",
		Filters: []*listenerv3.Filter{{
			Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: testutils.MarshalAny(hcm)},
		}},
	}
	if mtls {
		chain.Name = "mtls"
		chain.TransportSocket = socket(&tlsv3.DownstreamTlsContext{
			RequireClientCertificate: wrapperspb.Bool(true),
			CommonTlsContext: &tlsv3.CommonTlsContext{
				TlsCertificateProviderInstance: instance("identity"),
				ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
					CaCertificateProviderInstance: instance("roots"),
				}},
			},
		})
	}
	return &listenerv3.Listener{
		Name: fmt.Sprintf(serverTemplate, addr),
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: tcp.IP.String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(tcp.Port)},
		}}},
		FilterChains: []*listenerv3.FilterChain{chain},
	}
}

func filter(name string, cfg proto.Message) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(cfg)}}
}

func socket(m proto.Message) *corev3.TransportSocket {
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: testutils.MarshalAny(m)}}
}

func instance(name string) *tlsv3.CertificateProviderPluginInstance {
	return &tlsv3.CertificateProviderPluginInstance{InstanceName: name}
}

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}
