// Package cluster is the cluster layer of goxds's data plane: it owns the
// clusters a channel (or an HTTP client) routes to, whatever transport
// carries the requests, over endpoints it does not own (package
// dataplane/endpoint) and leaf policies it does not implement (package
// dataplane/lbpolicy). It imports nothing of grpc-go or net/http; a
// transport adapter (grpcxds: the goxds balancer; httpxds: its
// Transport) binds it to its own connections, locks and pickers.
//
// # What it owns
//
// A [Set] holds every cluster of one channel: the clusters the routes of
// the snapshot send to (Set.Update, with [RouteClusters] as its roots),
// and those the host adds besides them (Set.Add: grpcxds's RLS targets).
// [Holds] keeps the accounts of the latter: the holds on each cluster
// (a route's cluster specifier plugin choosing it for requests), the
// config tree following it ([Subscriber]), its place among the roots
// once a snapshot has it (Holds.Update), its release, and whether it is
// failing, which pickers read without a lock (Holds.Failing).
// A cluster ([Cluster]) is built from its watchers.ClusterConfig:
//   - its priorities (gRFC A56): an EDS leaf's localities by priority,
//     with their weights and only the HEALTHY and UNKNOWN endpoints; a
//     LOGICAL_DNS leaf's one endpoint, whose resolution ([Resolution]) is
//     shared by every cluster naming the host:port; an aggregate cluster's
//     leaves flattened in order (gRFC A37), one rebuilt when a leaf
//     changes;
//   - priority selection: the first priority with a ready endpoint is
//     used; one still connecting is waited for until its failover timer
//     fires; every priority tried stays connected, so that traffic moves
//     back up as soon as a higher one is ready; a priority whose endpoints
//     all fail, or are all ejected by outlier detection, is passed over.
//     The failover timers of all clusters are one queue behind one timer
//     (failover.go), acted on up to a sixteenth of the timeout late (at
//     most 250 ms), so that the deadlines of thousands of clusters armed
//     by one configuration expire as one batch, with one picker;
//   - each priority's picker: the leaf's drops (EDS drop_overloads), its
//     circuit breaker (max_requests, counted per leaf across the clusters
//     that share it; with Config.ConnectionLimits, for a transport with
//     connection pools of its own, max_pending_requests at the pick and
//     max_connections through the leaf's [Limits], limits.go), its outlier detection (gRFC A50), and load recording
//     for LRS (gRFC A27), in the client.LoadStore of the server that sent
//     the Cluster (its LRSServer, so after a fallback the fallback's): per
//     locality the requests issued, in progress, succeeded and errored
//     (each attempt in the locality of the endpoint it went to, any error
//     a failure; from the pick, or with Config.StartOnSend from when the
//     transport says it left: Done.Started, Done.Unsent), drops by category with circuit breaker refusals in the
//     total only, and the backend metrics of the ORCA reports that
//     lrs_report_endpoint_metrics selects (gRFC A85);
//   - clusters that connect on their first request and go idle again
//     when unused (Config.ConnectOnFirstRPC, ClusterIdleTimeout;
//     idle.go);
//   - priorities whose policy went idle (pick_first that lost its
//     endpoint, gRFC A62): used as ready ones are (A56), without a
//     failover timer, and their picker holds the next request and has
//     the leaf start a new pass from the first endpoint (exitidle.go).
//
// # What the transport gives it
//
// The transport is the [Host]: its lock (Host.Do runs the Set's timers
// and wakes under it), its connections (the pool's endpoint.Dialer, and
// Host.Endpoint, which makes an endpoint's key and Tag from its
// addresses, HTTP CONNECT proxy, hostname and security), its security per
// leaf (Host.Security, opaque here), its DNS resolver (Host.StartDNS,
// reporting with Set.Resolved), its log (queued by the host, written with
// no lock held), its view of a request's headers (Host.HeaderHash, for
// ring_hash's request_hash_header) and the clusters it keeps awake
// (Host.Pinned: never idle, spared by the idle sweep; grpcxds: the RLS
// targets, Holds.Held).
//
// # Picking
//
// After each event the owner calls Set.Settle, which chooses the priority
// and picker of each cluster that changed, then publishes Set.Pickers (a
// sharded immutable [PickerMap]: a change copies the shards of the
// clusters that changed only) and Set.State (from counts of clusters by
// state, not a walk), then Set.Finish, which shuts down the endpoints no
// cluster lists any more and returns what to do once the lock is released
// ([Deferred]). A [Picker] is immutable and never takes the owner's lock.
// Its pick is neutral: a [Result] with the endpoint, its connection as
// the picker saw it, and a [Done] that the transport finishes with the
// request's error and its ORCA load report (which end the circuit
// breaker's count, outlier detection's and LRS's counts, and
// least_request's); its errors are [ErrQueue], a [*DropError], an
// [*OverloadError] or the cluster's reason to fail the request, which the
// adapter turns into its own (grpcxds: balancer.ErrNoSubConnAvailable,
// UNAVAILABLE statuses). Cluster and endpoint states are endpoint.State,
// which the adapter maps to its own (gRPC's connectivity.State).
//
// # Locking
//
// A Set has no lock of its own: it is guarded by the caller's lock, like
// the endpoint pool under it, and every method needs it held but Picker
// methods, Done.Finish, Deferred.Run and StopWaking (called with no lock
// held). The reason is the pool's: an endpoint's state change marks its
// clusters dirty in the critical section that applies it, and a second
// lock would be taken inside the owner's on every event for no
// concurrency gained. Timers and wakes arrive on goroutines of their own
// and enter through Host.Do. The waking of idle clusters and idle
// priorities has a small lock of its own (pickers ask for wakes, and
// must not take the owner's).
//
// # Cost
//
// What an update costs grows with the change, not with the clusters: an
// update that keeps the routes looks only at the clusters whose
// ClusterConfig pointer changed (watchers.ClusterMap.Changes) and the
// aggregates above them; endpoints, in-flight counters and load stores
// are let go by reference counts, never by a walk of every cluster; and
// maps that once held every cluster are made anew rather than ranged over
// at their old size.
package cluster
