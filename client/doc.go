// Package client is the xDS client: it subscribes to the resources its
// watchers want, caches them, judges every response (ACK or NACK), and tells
// watchers of every change.
//
// # Using it
//
// Create a [Client] from a bootstrap configuration and watch resources by
// type and name:
//
//	cfg, err := bootstrap.FromEnv()
//	...
//	c, err := client.New(cfg, client.Options{})
//	...
//	defer c.Close()
//	cancel := client.Watch(c, resources.ClusterType, "my-cluster", client.WatcherFuncs[*resources.Cluster]{
//		OnUpdate: func(c *resources.Cluster) { ... },
//	})
//	defer cancel()
//
// A server is contacted when the first resource it serves is watched: the
// top-level servers of the bootstrap, or for xdstp:// names the servers of
// the name's authority (the first of the list; see Fallback). Whether the
// stream is state of the world or delta is the server's api_type in the
// bootstrap; the watch API is the same.
//
// # Dynamic parameters
//
// A server may keep several variants of one resource name, each naming
// itself with constraints on dynamic parameters (discovery.v3
// ResourceName). [WatchWithOptions] watches with parameters
// ([WatchOptions].DynamicParameters, over the client-wide
// [Options].DynamicParameters): the server is sent a ResourceLocator, and
// the watch gets the variant whose constraints its parameters match (a
// resource without constraints matches every watch of its name). Watches of
// one name with different parameter sets are separate subscriptions, each
// with its own cache entry, status and does-not-exist timer; equal sets share
// one. Two variants in one response that match the same watch are an error:
// the response is NACKed naming both, and the watch is told. Delta
// removed_resource_names removes the variant with those constraints; a plain
// removed name the variant without constraints. [Client.Dump] reports each
// parameter set ([ResourceStatus].DynamicParameters), CSDS as
// name{k="v", ...}. The errors a watch gets carry its parameters
// ([Error].DynamicParameters), and so do log lines.
//
// # Fallback
//
// xds_servers, top-level or an authority's, is a list in priority order
// (gRFC A71). The client uses the first server of each authority. It moves
// to the next only when the current one fails without having sent a
// response (it cannot be reached, or its stream ends before answering)
// while some watcher of that authority waits on a resource the cache lacks
// (neither received nor known not to exist; for a wildcard watch, no
// response of its type yet). With everything cached it stays, and watchers
// keep the primary's data; but an authority with
// fallback_on_reachability_only (gRFC A95, honoured only with
// [bootstrap.Config].EndpointFallback, that is
// GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK=true) moves as soon as its
// server cannot be reached, cached or not: meant for an authority of
// endpoints, which go stale. Watchers are not told of a failure the fallback
// covers, only of one no server is left to cover. Resources from the
// fallback apply to the same cache entries as the primary's: watchers get
// an update only for what differs, and for a value that depends on the
// server that sent it (a Cluster with lrs_server self, whose
// [resources.Cluster].LRSServer names its sender), which is decoded again
// when the same bytes come from the other server. The client keeps
// reconnecting to the higher-priority servers, with every subscription;
// the first response of one makes it current again, and the lower servers'
// streams are closed.
// From a server that is no longer current nothing applies. Which server
// each resource came from is in [ResourceStatus].Server; which server each
// authority uses, and how each server is (connected or not, since when,
// its last error), is in [Client.Authorities].
//
// xdstp:// names are compared in canonical form (gRFC A47): context
// parameters sorted by key and percent-encoding normalised, both when a
// name is watched (the canonical form is what the server is asked for) and
// when a server names a resource. "xdstp://a/T/id?b=2&a=1" and
// "xdstp://a/T/id?a=1&b=2" are one resource; errors name it canonically. A
// malformed xdstp name is refused with [ErrInvalidName].
//
// # What watchers are told
//
// [Watcher.Update] brings each new valid version. [Watcher.ResourceError]
// says the resource cannot be used: it does not exist
// ([ErrResourceNotFound]: not received within [Options].WatchExpiry of being
// requested, deleted by the server while nothing valid was held or by a
// server marked fail_on_data_errors, or its TTL expired), it was rejected
// and no good version is held ([ErrResourceInvalid]), or the server cannot
// be reached and nothing is cached ([ErrServerUnavailable]). A name the
// transport cannot fetch at all (a type the server's API has no service
// for; a resource file missing, or whose content is rejected, which is
// [ErrResourceInvalid]) is told so at once, naming the file, and that
// concerns that name only: the server's health is not changed by it.
// [Watcher.AmbientError] reports trouble that leaves the last good value in
// force: a rejected update, the deletion of a Listener or Cluster, an error
// the server reports for the resource, or the server becoming unreachable.
// Following
// gRFC A57, a stream that ends after delivering responses is routine (the
// client reconnects, and nobody is told); a stream that fails without a
// response makes the server unhealthy, which watchers are told once per
// outage. Either way the does-not-exist timers of the stream's names stop
// until the names are sent again; with one stream per type, a stream that
// fails without a response while another of the server's streams answered
// is routine too. Errors are *[Error] values naming the resource; match causes with
// errors.Is.
//
// # Errors the server reports (gRFC A88)
//
// A server may name, in a response's resource_errors, resources it cannot
// serve. The watcher gets a *[ServerReportedError] with the server's code
// and message, matching [ErrReportedByServer] (and [ErrResourceNotFound]
// for NOT_FOUND): a resource error when nothing is held, an ambient error
// when a value is held, which stays. With the server's fail_on_data_errors
// feature, a NOT_FOUND or PERMISSION_DENIED error drops the held value
// instead, and is a resource error; other codes are transient and never
// drop anything. The error stops the name's does-not-exist timer, shows as
// [StatusReceivedError] in [Client.Dump] (and RECEIVED_ERROR in CSDS), is
// told once however often the server repeats it, and is told again to
// watchers that come later. The resource arriving again ends it. Such a
// response is not a NACK: it is ACKed, errors and all, and a Listener or
// Cluster named in its resource_errors is not deleted for being absent
// from a SotW response. With the server's resource_timer_is_transient_error
// feature (or grpc-java's spelling, resource_timer_is_transient_failure)
// the does-not-exist timer runs twice [Options].WatchExpiry, and its
// expiry means the server is slow: a resource error matching
// [ErrServerUnavailable], status [StatusTimeout].
//
// NACKs and the deletion of a Listener or Cluster are data errors too (gRFC
// A88). By default the value held stays in force: a NACK is an ambient
// error ([ErrResourceInvalid], [StatusNACKed]); so is a deletion, SotW
// (missing from a response) or delta (in removed_resources), which matches
// [ErrResourceNotFound], is told once, shows as [StatusDoesNotExist] with
// the value in [Client.Dump] (does_not_exist_but_cached in
// [Client.ResourceCounts]), and ends when the server sends the resource
// again. A server marked fail_on_data_errors has the value dropped
// instead, and watchers get a resource error. The ignore_resource_deletion
// feature (gRFC A53), which A88 deprecates, changes nothing: keeping the
// value is now the default. Deletion of other types (delta
// removed_resources of a RouteConfiguration or endpoints), and of anything
// from resource files, still deletes.
//
// The identifier a server gives in a response's control_plane is logged
// when first given and when it changes, and is in
// [ResourceStatus].ControlPlane.
// When a delta stream's server looks like istiod, the client warns once per
// server: istiod's delta server stops updating resources a client still
// watches once it unsubscribes from another, so use state of the world
// (api_type AGGREGATED_GRPC) with it. The signs, named in the warning: a
// control_plane identifier of istiod's (releases up to early 2025 give it
// on every type), a server_uri host of istiod's Service ("istiod…"), or a
// bootstrap written by istio-agent (node metadata ISTIO_VERSION).
//
// # Last known good on disk
//
// With [Options].Persist set to a directory, the client keeps there the
// last version it accepted of every resource it holds, so that a process
// restarted while its servers are down still has its configuration (the
// idea of Envoy's xds_resources_delegate). There is one file per resource
// type ("envoy.config.cluster.v3.Cluster.lkg"), rewritten whole by a
// goroutine of the client after changes, at most every 200 ms (changes
// made meanwhile go together into the next round): written to a temporary
// file, synced and renamed
// over the old one, so a crash leaves the old file or the new. Each file
// starts with the node id and the bootstrap's server URIs and ends with a
// SHA-256 checksum. A resource watched with dynamic parameters is kept
// under them, for the same watch after a restart (the constraints of the
// variant are not kept). A resource that is deleted or whose data is dropped
// leaves the file at the next write, and a type with nothing left has no
// file; resources that came with a TTL are not kept. Close writes what is
// pending before it returns.
//
// At start the client reads the directory. A file that is unreadable,
// corrupt (its checksum fails), written for another node, for servers none
// of which is in the bootstrap, of an unknown type, or stale (older than
// [PersistOptions].MaxAge) is ignored, with a warning naming the file and
// why; so is a resource of a server not in the bootstrap, one older than
// MaxAge (each resource keeps the time it was last known good), or one
// that no longer decodes. If, [PersistOptions].Wait after
// New, the server of a watched resource has not answered once, the
// watchers get the persisted value, decoded and validated as if the server
// recorded with it (the one that sent it, as this run's bootstrap lists
// that URI) had sent it again, and flagged as coming from disk: watchers
// that implement [UpdateInfoWatcher] (or set [WatcherFuncs].OnUpdateWithInfo) get
// [UpdateInfo].FromDisk, and [Client.Dump] shows [ResourceStatus].FromDisk
// with status [StatusRequested] (REQUESTED in CSDS, with the value). A
// watch made later, while the server still has not answered, gets the
// persisted value at once. A file never replaces what a server sent:
// once a server has answered, its persisted resources are no longer used.
// They stay in the files all the same until a server says something of
// that very name: one server's answer does not erase what another server,
// down at the moment, sent before, nor a resource not watched in this run.
//
// The server's word replaces the persisted value: the resource sent (an
// update without the flag, even with the same bytes; a delta stream does
// not list persisted values in initial_resource_versions, so that the
// server sends them), deleted, or reported in error. The does-not-exist
// timer does not report a persisted resource missing while its server has
// not answered; once it has, a persisted resource not sent within
// [Options].WatchExpiry of the request is dropped as not existing. A SotW
// Listener or Cluster response does not delete a persisted resource for
// its absence: like a name never received, it is left to that timer.
//
// # Logs
//
// [Options].Logger receives the client's log lines. Each names the server,
// and those about one resource type name its type URL. An outage is a
// warning when it begins and an info line when the server answers again;
// a NACK is a warning with the error sent. Given no logger, the client
// still sends its warnings and errors, and only those, to [slog.Default].
// The logger's handler never runs while the client holds its lock: lines
// decided under it are written once it is released, with the time and
// source they were logged at, so a slow handler does not stall the client
// and one that calls back into it (Dump, a watch) does not deadlock.
//
// # Metrics
//
// [Options].Metrics receives the counters and the connected gauge of gRFC
// A78; [Client.ResourceCounts] gives its resources-per-cache-state gauge.
//
// # Guarantees
//
//   - Callbacks of all watchers of a client run one at a time, in order, on
//     one goroutine, never while the client holds a lock: they may watch and
//     cancel. The next response is read only once they have returned.
//   - A new watcher of a cached resource gets it at once. Many watchers of
//     one name share one subscription and one decode.
//   - An invalid resource never replaces a good one; the response is NACKed
//     with every error found, and its valid resources still apply.
//   - A resource whose bytes did not change is neither decoded nor delivered
//     again (SotW resends every Listener and Cluster in every response),
//     unless they now come from another server and the value depends on
//     its sender (resources.SourceDependent).
//   - Decoders get the sending server's config, the bootstrap and the
//     client's registry ([resources.DecodeContext]). The registry of types,
//     HTTP filters and cluster specifier plugins is the client's own
//     ([Options].Registry, copied by New): registering later, or into
//     another client's, changes nothing here.
//   - Subscriptions made by the callbacks for one response reach the server
//     as one request per type.
//   - No goroutine of the client outlives [Client.Close]. Close may be
//     called from a callback: it then returns at once, no other callback
//     runs, and the client's last goroutine ends when that callback returns.
//   - A watch started after Close gets a resource error wrapping [ErrClosed].
//
// # Load reporting
//
// [Client.ReportLoad] returns the [LoadStore] of an LRS server (for a
// cluster with lrs_server self, the management server it came from:
// [resources.Cluster].LRSServer) and
// opens the LRS stream to it unless one is open: the first
// LoadStatsRequest carries the node, with the client feature
// envoy.lrs.supports_send_all_clusters; then, at each
// load_reporting_interval the server asks for, the load of the clusters
// it names (or all, with send_all_clusters) counted since the last report.
// The stream restarts with the transport's backoff, and closes when the
// last user has released it, or on Close, after a last report of what was
// counted since the previous one (at most transport.FinalReportTimeout). Recording an RPC costs a few
// atomic adds on a [LocalityLoad] looked up beforehand.
//
// # Rules applied to responses
//
// For Listener and Cluster (whole-world types), a SotW response lists every
// resource: one received before and now missing is deleted (which, with
// the value kept unless the server is marked fail_on_data_errors, is an
// ambient error: see gRFC A88 above). A name never received is left to its
// does-not-exist timer. For other types absence means nothing.
// Delta responses delete only what removed_resources names. Resources
// nobody asked for are ignored (and not decoded when their name is known
// without decoding). A name twice in one response, a body whose type_url
// does not match, or one that fails to decode or validate makes the
// response a NACK. Resources wrapped in discovery.v3.Resource may carry a
// TTL: when it expires the resource is removed, with the server reachable or
// not; a wrapper without a body (a heartbeat) only refreshes the TTL.
//
// [Client.Dump] reports the state of every resource for status pages.
package client
