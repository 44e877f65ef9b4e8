// Package xdsdebug is a debug page for a service's xDS client: an
// http.Handler to mount beside /debug/pprof that shows what the client
// knows, as HTML for people and as JSON for tools.
//
//	dbg := xdsdebug.New(c, xdsdebug.Options{})
//	http.Handle("/debug/xds", dbg)
//
// # What it shows
//
// The overview has the node, the servers of every authority in use (in
// priority order, which one is in use and whether it is a fallback,
// connected or not and since when, the error of an outage and the last
// stream error; see client.Client.Authorities), the resources of the
// cache counted by type and status, and the config trees the page tracks.
// From there:
//
//   - view=resources lists the resources (type=, status= one of the
//     client.Status names or ERROR, q= a part of the name): name, version,
//     status, when it last changed, the error if NACKed or missing,
//     whether it was read from disk, the server it came from;
//   - view=resource&type=&name= shows one, with its value (and a rejected
//     version's) as protojson;
//   - view=tree&tree= shows a config tree as its watcher sees it: the
//     listener, route configuration and virtual host of the latest
//     snapshot, and its clusters (list=clusters: kind, target, endpoints,
//     error; status=ERROR for those in error) or routes (list=routes), or
//     the whole tree as the watchers package prints it (list=text, cut at
//     512 KiB); cluster= adds one cluster printed, with its localities and
//     endpoints (watchers.Snapshot.Tree; JSON: the TreeNode).
//
// Every list is paged (page=, limit= up to MaxLimit rows, DefaultLimit
// unless asked), and filtered on the server, so a page stays small however
// large the configuration: at 10,000 clusters the overview is a few KB and
// a page of 100 clusters some 40 KB. format=json (or an Accept header
// asking for application/json) gives the same data as JSON, with the
// same paging; the page's links and the JSON's prev/next are relative
// queries, so the handler works under any path.
//
// # Config trees
//
// The client does not know its config trees; the service shows them by
// passing its tree watcher through [Handler.Track], which records each
// event and passes it on, or has the page watch one of its own with
// [Handler.WatchTree] (for trees out of reach, such as a gRPC channel's).
//
// # Safety
//
// The page only reads: it answers GET and HEAD. Everything from servers
// and the cache is escaped by html/template; the page has no script, and
// its Content-Security-Policy allows none. It holds no state beyond the
// trees given to it, and starts no goroutine. It shows the configuration
// of the service, so mount it where /debug/pprof is: behind whatever
// keeps that private.
package xdsdebug
