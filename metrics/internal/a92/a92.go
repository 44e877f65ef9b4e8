// Package a92 holds what the metrics adapters share of gRFC A92, the
// external authorization filter's metrics (the draft of 2026-05-26,
// grpc/proposal commit 207a967): four counters on each side, by the
// outcome of a check (dataplane/extauthz's Outcome, passed as its
// String), measured by goxds's
// gRPC client (grpcxds.ExtAuthzMetrics) and server
// (xdsserver.ExtAuthzMetrics), and under goxds's own names by its HTTP
// client and server (httpxds).
package a92

import "github.com/goxds/xds/metrics/internal/instrument"

// Instrument is one counter of gRFC A92.
type Instrument = instrument.Instrument

// The client's counters, labelled grpc.target and grpc.lb.backend_service
// (gRFC A89: the RPC's cluster; "" where the route leaves the cluster to
// a cluster specifier plugin, picked after the filters run). Names,
// descriptions and units are the gRFC's; grpc-go (v1.85) registers none.
var (
	ClientAllowed = Instrument{
		Name:        "grpc.client_ext_authz.allowed_rpcs",
		Description: "Number of RPCs that were allowed by the ext_authz server.",
		Unit:        "{RPCs}",
		Labels:      []string{KeyTarget, KeyBackendService},
	}
	ClientDenied = Instrument{
		Name:        "grpc.client_ext_authz.denied_rpcs",
		Description: "Number of RPCs that were denied by the ext_authz server.",
		Unit:        "{RPCs}",
		Labels:      []string{KeyTarget, KeyBackendService},
	}
	ClientFilterDisabled = Instrument{
		Name:        "grpc.client_ext_authz.filter_disabled_rpcs",
		Description: "Number of RPCs for which the filter was disabled.",
		Unit:        "{RPCs}",
		Labels:      []string{KeyTarget, KeyBackendService},
	}
	ClientFailed = Instrument{
		Name:        "grpc.client_ext_authz.failed_rpcs",
		Description: "Number of RPCs for which the ext_authz call-out failed.",
		Unit:        "{RPCs}",
		Labels:      []string{KeyTarget, KeyBackendService},
	}
)

// The server's counters, with no label.
var (
	ServerAllowed        = server(ClientAllowed)
	ServerDenied         = server(ClientDenied)
	ServerFilterDisabled = server(ClientFilterDisabled)
	ServerFailed         = server(ClientFailed)
)

// server is the server side's counter of the same outcome as the
// client's c: grpc.server_ext_authz.*, with no label.
func server(c Instrument) Instrument {
	c.Name = "grpc.server_ext_authz." + c.Name[len("grpc.client_ext_authz."):]
	c.Labels = nil
	return c
}

// The HTTP client's and server's counters (httpxds): what A92 measures of
// gRPC's RPCs, of HTTP requests, under goxds's names. grpc.*_ext_authz.*
// count a gRPC channel's or server's RPCs, and a process with both kinds
// of client would mix them in one series; OpenTelemetry's HTTP
// conventions have no authorization counters. The client's are labelled
// grpc.lb.backend_service only: an HTTP client has no channel target.
var (
	HTTPClientAllowed        = httpSide(ClientAllowed, "goxds.http.client_ext_authz.", []string{KeyBackendService})
	HTTPClientDenied         = httpSide(ClientDenied, "goxds.http.client_ext_authz.", []string{KeyBackendService})
	HTTPClientFilterDisabled = httpSide(ClientFilterDisabled, "goxds.http.client_ext_authz.", []string{KeyBackendService})
	HTTPClientFailed         = httpSide(ClientFailed, "goxds.http.client_ext_authz.", []string{KeyBackendService})
	HTTPServerAllowed        = httpSide(ClientAllowed, "goxds.http.server_ext_authz.", nil)
	HTTPServerDenied         = httpSide(ClientDenied, "goxds.http.server_ext_authz.", nil)
	HTTPServerFilterDisabled = httpSide(ClientFilterDisabled, "goxds.http.server_ext_authz.", nil)
	HTTPServerFailed         = httpSide(ClientFailed, "goxds.http.server_ext_authz.", nil)
)

// httpSide is c for HTTP requests: prefix then c's outcome, "_requests"
// for "_rpcs", in {request}s.
func httpSide(c Instrument, prefix string, labels []string) Instrument {
	outcome := c.Name[len("grpc.client_ext_authz.") : len(c.Name)-len("_rpcs")]
	return Instrument{
		Name:        prefix + outcome + "_requests",
		Description: "Number of requests " + c.Description[len("Number of RPCs "):],
		Unit:        "{request}",
		Labels:      labels,
	}
}

// The tables by outcome, in Outcomes' order, which is that of
// dataplane/extauthz's Outcome (a92_test.go holds them to it).
var (
	Client     = [4]Instrument{ClientAllowed, ClientDenied, ClientFilterDisabled, ClientFailed}
	Server     = [4]Instrument{ServerAllowed, ServerDenied, ServerFilterDisabled, ServerFailed}
	HTTPClient = [4]Instrument{HTTPClientAllowed, HTTPClientDenied, HTTPClientFilterDisabled, HTTPClientFailed}
	HTTPServer = [4]Instrument{HTTPServerAllowed, HTTPServerDenied, HTTPServerFilterDisabled, HTTPServerFailed}
)

// Outcomes are the outcomes the metrics interfaces pass
// (dataplane/extauthz's Outcome.String), in the tables' order.
var Outcomes = [4]string{"allowed", "denied", "filter_disabled", "failed"}

// Index is outcome's index in the tables; -1 for a string that is none.
func Index(outcome string) int {
	for i, o := range Outcomes {
		if o == outcome {
			return i
		}
	}
	return -1
}

// The attribute keys.
const (
	KeyTarget         = "grpc.target"
	KeyBackendService = "grpc.lb.backend_service"
)
