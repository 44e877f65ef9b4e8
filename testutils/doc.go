// Package testutils helps test xDS clients, goxds's own and its users':
// in-process xDS servers (gRPC and REST), builders for the resources they
// serve, writers of resource files, and a bootstrap writer. It stands on its
// own and imports no other goxds package.
//
// # Management server
//
// [ManagementServer] is go-control-plane's real xDS server and caches on a
// free port of 127.0.0.1, serving SotW and delta ADS. [ManagementServer.Update]
// sets, in one call, every resource a node sees:
//
//	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
//	...
//	defer ms.Stop()
//	err = ms.Update(ctx, "node-1", testutils.DefaultResources(testutils.ResourceParams{
//		ListenerName: "svc", Ports: []uint32{port},
//	}))
//
// It serves every mode a client runs against go-control-plane: SotW and
// delta, over ADS (StreamAggregatedResources, DeltaAggregatedResources) and
// over the per-type services (StreamClusters, DeltaListeners, ...), from the
// snapshot cache without its ADS mode (the default), with it
// (ManagementServerOptions.ADS, as an Envoy fleet's server runs it), or from
// one linear cache per node and type (ManagementServerOptions.Linear).
//
// Where go-control-plane behaves in ways that get in a client test's way, the
// server departs from it, and says so:
//
//   - Its snapshot cache runs with ads=false unless ManagementServerOptions.ADS
//     asks for ADS mode, in which it answers a SotW request naming resources
//     only once the request names every resource of the type in the
//     snapshot, so a client asking for a subset gets nothing and its
//     does-not-exist timer fires (the wildcard, sent alone in the legacy
//     form, is answered).
//   - Update gives a new version only to the types that changed.
//
// Behaviour kept as go-control-plane has it, which tests must allow for:
//
//   - A NACK carries the last accepted version, which differs from the
//     cache's, so the server resends the rejected resources at once, on every
//     NACK (envoyproxy/go-control-plane#962); a client that does not pace its
//     NACKs loops.
//   - A SotW request whose response_nonce is not the latest one of its type
//     is ignored entirely, subscription changes included.
//   - A delta subscription to a name the server does not have gets no
//     response at all, not a removed_resources entry; a client has to rely on
//     its does-not-exist timer, as in SotW.
//   - Delta responses never carry TTLs, and heartbeats are SotW only. A SotW
//     heartbeat holds only the resources that have a TTL, even for listeners
//     and clusters, so a client must not read it as the full state of the
//     world and delete the others.
//   - A stream's first delta request with no names is a legacy wildcard, and
//     so is a SotW stream's type whose requests never named anything.
//   - The snapshot cache answers a SotW request by the literal names in it:
//     one naming "*" (an explicit wildcard) gets only the other resources it
//     names, if any (envoyproxy/go-control-plane#558). Its delta side and
//     the linear cache serve an explicit "*".
//
// # Fake server
//
// [FakeServer] serves both ADS RPCs, and the per-type ones (StreamListeners,
// DeltaClusters, ...; [FakeStream.TypeURL] tells them apart), with no logic
// of its own: it records every request and sends exactly what the test gives
// it, so a test reads like the exchange it checks:
//
//	req, err := fs.NextRequest(ctx)
//	err = fs.Send(testutils.SotWResponse(typeURL, "1", "nonce-1", testutils.Cluster("c", "")))
//	ack, err := fs.NextRequest(ctx)
//	// ack.GetResponseNonce() == "nonce-1"
//
// Every wait takes a context and ends with it; nothing in this package sleeps.
//
// Send and SendDelta go on the stream of the response's type: the last ADS
// stream, or the last per-type stream of that type.
//
// # LRS server
//
// go-control-plane ships no load reporting server. [LRSServer] is a
// scriptable one: serve it beside a ManagementServer
// (ManagementServerOptions.LoadReporting) and clusters whose lrs_server is
// self report to it. [LRSServer.NextStream] hands each stream to the test,
// which reads the LoadStatsRequests ([LRSStream.NextRequest]) and sends the
// LoadStatsResponses it wants.
//
// # REST server
//
// [RESTServer] serves REST-JSON polls (POST /v3/discovery:clusters, ...)
// through go-control-plane's REST handler over the same snapshot cache as
// [ManagementServer], with [RESTServer.Update] alike. With
// RESTServerOptions.LongPoll it holds a poll for which nothing changed until
// an Update changes it; RESTServerOptions.OnRequest can fail requests.
//
// # HTTP CONNECT proxy
//
// [ConnectProxy] is an HTTP/1.1 CONNECT proxy for gRFC A86's tunnels: it
// counts and records them, and refuses them with 403 while asked to.
// [HTTP11ProxyCluster] wraps a Cluster's transport socket in
// http_11_proxy, and [ViaProxy] names the proxy in an assignment's
// endpoint metadata.
//
// # Side services
//
// [AuthzServer] and [ProcServer] are the authorization service (gRFC A92)
// and the processor (gRFC A93) a filter's GrpcService names, on 127.0.0.1.
// [SideTLS] makes either one a mutual-TLS service and gives what reaches
// it (gRFC A102's TlsCredentials and XdsCredentials plugins, the
// bootstrap's certificate provider instances); [RunSideAuthz] and
// [RunSideProc] run the cases every user of side channels tests, each with
// a service of its own. [HeldAuthz] holds a check until released and
// counts its connections, for tests of a side channel's life across
// configuration updates.
//
// # Files
//
// [WriteResponseFile] writes a DiscoveryResponse as a FILESYSTEM server's
// file, in the format of its extension (binary, JSON, YAML, proto text), by
// an atomic rename; [MarshalResponseFile] only encodes it.
//
// # Clock
//
// [FakeClock] is a time source whose time moves only when a test calls
// [FakeClock.Advance]. Given to a client (client.Options.Clock), it fires the
// 15 s does-not-exist timer and TTLs the moment the test chooses: a test
// proves that a timer did not fire by advancing to just before its deadline
// and looking, whatever the load on the machine.
//
// # Resources and bootstrap
//
// The builders ([Listener], [RouteConfig], [Cluster], [Endpoints], ...) make
// resources that pass gRPC's client-side validation (gRFC A27, A28): config
// sources are ADS, and the router filter is the last HTTP filter.
// [WrapVariant] names a resource as a variant (resource_name with dynamic
// parameter constraints, built by [ConstraintValue], [ConstraintExists],
// [ConstraintAnd], [ConstraintOr], [ConstraintNot]), for tests of watches
// with dynamic parameters. [BootstrapJSON] writes a gRFC A27 bootstrap with insecure credentials and the
// goxds fields that pick the protocol of each server: "api_type" (SotW or
// delta, ADS or per type, REST, FILESYSTEM), "api_type_per_type",
// "resource_files" and "refresh_delay".
package testutils
