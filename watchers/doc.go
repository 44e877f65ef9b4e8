// Package watchers follows whole configuration trees for a service: what it
// wants is not four kinds of callbacks but "the listener, its routes, every
// cluster those routes can send to, and their endpoints, complete and
// consistent, and again whenever any of it changes".
//
// # The config tree
//
// [WatchConfigTree] watches a Listener and everything below it, the way
// gRPC's xDS resolver does (gRFC A74), and hands a [TreeWatcher] one
// [Snapshot] at a time:
//
//	cancel := watchers.WatchConfigTree(c, "my-service", watchers.TreeOptions{}, watchers.TreeWatcherFuncs{
//		OnUpdate: func(s *watchers.Snapshot) {
//			for name, cc := range s.Clusters.All() { ... }
//		},
//		OnResourceError: func(err error) { ... }, // no usable tree at all
//	})
//	defer cancel()
//
// A snapshot holds the Listener, its RouteConfiguration (from RDS or
// inline), the virtual host chosen for [TreeOptions].Authority, and for
// every cluster a route of that virtual host can send to, each branch of
// weighted clusters included, a [ClusterConfig]: the Cluster with its
// endpoints (EDS) or its host:port (LOGICAL_DNS). An aggregate cluster
// lists its leaf clusters in priority order, each once, and each leaf has
// its own entry.
//
// With gRFC A95 on (bootstrap Config.EndpointFallback), a locality of an
// assignment may name an LbEndpointCollection holding its endpoints. The
// tree watches the collections and puts each in its locality
// ([resources.Endpoints.WithCollections]) before the assignment reaches a
// snapshot: consumers see endpoints as if they were inline, and
// [resources.Locality].EndpointCollection says where they came from. An
// assignment waits for its collections as a cluster waits for its
// assignment; a change of a collection is a change of the endpoints. A
// collection that cannot be had (it does not exist, or was rejected
// before any version was accepted) leaves its locality without endpoints,
// as an empty one does (unreachable, the gRFC says), and the tree reports
// its error as an ambient one.
//
// # When a snapshot is delivered
//
//   - Only when every part is resolved or known to be in error. A cluster
//     that does not exist (not received within the client's WatchExpiry,
//     deleted by a server marked fail_on_data_errors, or rejected) is in
//     the snapshot with its Err set; it never
//     stalls the tree and is never just absent. The listener or route
//     configuration itself being unusable, or no virtual host matching,
//     is reported to [TreeWatcher.ResourceError] instead.
//   - Make-before-break: when the listener moves to another route
//     configuration, a route to another cluster, or a cluster to other
//     endpoints or children, the snapshot in force stays current until the
//     new parts have arrived or failed. No snapshot mixes a new route with
//     clusters it cannot resolve yet, and the subscriptions of the old
//     parts are kept until the new snapshot is out.
//   - Only when something in it changed. Parts that did not change keep
//     their pointers: the client hands out a new value only when a
//     resource really changed, and an unchanged [ClusterConfig] is the same
//     pointer in the next snapshot.
//
// # Cost of an update
//
// A change of endpoints, the usual update of a large tree, does not walk
// the tree: the ClusterConfigs of the clusters fetching them are replaced
// in the snapshot in force. Nor does a change of a cluster that keeps its
// kind, EDS service name or children (only its ClusterConfig is replaced),
// or a route configuration whose routes name the same clusters.
// [Snapshot].Clusters is a [ClusterMap], an immutable map whose next
// version shares every part but the one changed, so an update of one
// cluster in ten thousand costs what one cluster costs. A change of shape
// (routes naming other clusters, a cluster's kind or children) walks the
// tree once; clusters and endpoints arriving after that walk are resolved
// one by one as they come, so a tree's first snapshot walks each cluster
// once.
//
// # Aggregate clusters
//
// Aggregate clusters are followed to their leaves, depth first in priority
// order, a leaf reached twice (a diamond) keeping its first place. A cycle
// is reported as [ErrAggregateCycle] on the clusters that form or reach
// it, and a route's cluster whose tree is more than [MaxAggregateDepth]
// clusters deep as [ErrAggregateTooDeep]; nothing past that depth is
// watched.
//
// # Clusters no route names
//
// A route whose cluster specifier plugin names the cluster of each request
// (gRPC's route lookup service, RLS) sends requests to clusters no route
// names. [TreeOptions].Clusters, a [ClusterSet], names them while they are
// in use: the tree follows each like a route's cluster, and its snapshots
// include it once it has arrived or is known missing; one still arriving
// holds no snapshot back (as gRPC's dynamic cluster subscriptions, gRFC
// A74). A change of the set is applied on the client's callback
// goroutine, as every change of the tree is, by one walk of the tree; a
// cluster of the set and its endpoints arriving after it join the
// snapshot in force without another, unless an aggregate cluster waits
// for them.
//
// # Subscriptions
//
// The tree watches, through the client, exactly what it needs plus, during
// a change, what the snapshot in force uses; everything else is dropped,
// so the client unsubscribes from it. Watches started while handling one
// response reach the server together, one request per type, so a route
// configuration naming a thousand clusters costs one CDS and then one EDS
// request, not a thousand. Cancelling the tree drops every watch it holds.
//
// # Printing a snapshot
//
// [Snapshot.WriteTo] prints a snapshot as an indented tree, one line per
// element: the listener, its route configuration, the virtual host chosen,
// each route with its match and action, the clusters it sends to (an
// aggregate cluster's leaves below it), their localities and endpoints; a
// cluster that cannot be used shows its error on its line; fmt.Print
// prints a one-line summary. [Snapshot.Tree] gives that tree as
// [TreeNode]s, kinds and names apart from the text, for programs that show
// it their own way: JSON for scripts, an HTML page. The resources' value
// types print in the words of the xDS configuration (for example
// resources.LBPolicy as "ring_hash{min_ring_size=1024
// max_ring_size=4096}"), which the tree's lines use.
//
// # Concurrency
//
// The TreeWatcher is called from the client's callbacks: serialized with
// every watcher of the same client, on one goroutine, never under a lock.
// It may call the cancel function of the tree (from any goroutine, and
// from its own callbacks) and watch or cancel other resources.
package watchers
