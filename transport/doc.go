// Package transport carries an xDS client's subscriptions to a management
// server and the server's responses back: over one ADS stream per server,
// over one gRPC stream per type, by REST-JSON polling, or from files on
// disk, as the server's bootstrap.APIType says. The watch API above it is the
// same whatever the source.
//
// A [Transport] owns the wire state and nothing else: for each resource type
// (each logical sub-stream of the aggregated stream) the last accepted
// version, the latest nonce and the names of interest; for delta, the
// subscription changes not yet sent and the initial_resource_versions of a
// new stream. It knows no watchers and no cache. What it learns goes to a
// [Handler], which the client implements.
//
// # Requests
//
// State of the world (StreamAggregatedResources): every request of a type
// names every resource wanted, with the last accepted version and the latest
// nonce; the first request of the stream carries the node. An ACK repeats
// the response's version and nonce; a NACK keeps the last accepted version
// and sets error_detail. An empty list is never the first request of a type
// unless the wildcard is wanted, since the server reads it as the legacy
// wildcard.
//
// The wildcard ("*") goes out in the legacy form (SotW: an empty list; delta:
// no names subscribed) while it is the only interest of its type on the
// stream, since some servers (go-control-plane's snapshot cache) understand
// no other; beside names it is named "*", as Envoy does, and stays named
// for the rest of the stream once anything was named. Dropping a legacy
// wildcard takes two requests: "*" named (listed, or subscribed), then
// dropped. A new stream chooses the form afresh. wildcard.go has every
// transition. A REST poll stands alone, so a wildcard-only poll always has
// the legacy form.
//
// Delta (DeltaAggregatedResources): requests carry only changes
// (resource_names_subscribe, resource_names_unsubscribe). ACK and NACK carry
// the response's nonce; a request that only changes subscriptions has none.
// The first request of a type on a new stream subscribes to every name
// wanted and lists, in initial_resource_versions, the resources the client
// holds ([Handler.ResourceVersions]); no later request carries it.
//
// Subscription changes made close together, for one type or many, go out as
// one request per type: [Transport.UpdateSubscriptions] only records the
// change and wakes the sender. A name removed and wanted again before the
// removal was sent is held back until it has been, then subscribed in the
// next request: the server must learn that the client dropped it, or it
// would never send it again. For the same reason no SotW request of a type
// goes out while a response of it is with the handler: it would carry the
// previous nonce, which a server that has sent a newer response ignores
// (go-control-plane does), subscription change and all, while the client
// may already have applied the newer response and acted on the change.
// Changes made meanwhile go out with the new nonce once the verdict is in.
//
// # Dynamic parameters
//
// A subscription with dynamic parameters is named by a key made with
// [SubscriptionKey]; a plain name is its own key, and costs what it always
// did. Such a subscription goes out as a ResourceLocator (SotW
// resource_locators, delta resource_locators_subscribe and
// resource_locators_unsubscribe), and its name goes in the plain names
// beside it (once per name, however many parameter sets), so that a server
// that ignores locators still serves the resource; the name leaves only with
// the last subscription of it. A delta stream's initial_resource_versions is
// keyed by name, as the spec's map is: a name goes in when every
// subscription of it holds the same version, and is left out otherwise, so
// that the server sends it again. A delta response's removed_resource_names
// with constraints reach the handler as [Response].RemovedVariants; those
// without join removed_resources. locators.go has the details.
//
// Over a gRPC stream every response must carry a nonce, which pairs it with
// its reply; one without is NACKed unread and the handler never sees it.
//
// A response of a type not subscribed to on the stream (no name of it
// wanted, or none sent yet) is ignored, as Envoy does: the handler never
// sees it, no reply is sent, and its version is not adopted, so the next
// request of the type carries the last version actually applied. Its nonce
// is kept if the stream has carried the type. A NACK's error_detail is at
// most [MaxErrorDetailBytes], and valid UTF-8.
//
// # Flow control
//
// Each response is handed to [Handler.OnResponse], which returns the
// verdict. The reply goes out at once, but the next response is not read
// until the handler calls done, which the client does after its watchers
// have seen the change: a slow consumer slows the server, not the client's
// memory.
//
// A server may answer every NACK by resending what was rejected at once
// (go-control-plane's caches do), which would make a tight NACK loop. The
// repeats of one NACK are held, longer each time ([Options].NACKBackoff),
// but only that reply is held: the stream is read on, other types' responses
// are answered at once, and a newer response of the held type replaces the
// held NACK with its own reply. A subscription change of the type sends the
// held NACK with it, since a request without it would read as an ACK.
//
// # Streams and reconnection
//
// A stream starts when the first name is wanted. When it fails the
// transport reports it ([Handler.OnStreamError]) and starts a new one after
// an exponential backoff with jitter ([Options].Backoff, grpc's
// backoff.Config), reset once a stream has delivered a response. Two stream
// starts are never closer than [Options].MinStreamInterval, even after a
// healthy stream, so a server that answers once and hangs up cannot drive
// the client into a reconnect loop. Both waits run on [Options].Clock, which
// a test replaces with a fake one to see them as timers. On the new stream
// every subscription is sent again.
//
// The gRPC channel under the streams has a connect backoff of its own, which
// grows through an outage; a stream opened fail-fast while the channel waits
// it out would fail without trying the server, and the two backoffs would
// add up. So a stream opened while the channel is in TRANSIENT_FAILURE
// first makes it try at once and waits for that attempt (half a second at
// most, bounded by the stream's context): the stream comes back within the
// transport's own backoff of the server's return. The first failure of an
// outage is reported at once as before; only the later attempts, already
// reported once, wait before reporting theirs.
//
// # Per-type streams
//
// With APITypeGRPC or APITypeDeltaGRPC (or per-type overrides in
// bootstrap.ServerConfig.APITypePerType) each type has a stream of its own,
// on its service: ListenerDiscoveryService.StreamListeners or
// DeltaListeners, and likewise for routes, scoped routes, virtual hosts
// (delta only), clusters, endpoints, secrets and runtime. Each stream has its
// own version, nonce, reconnection and backoff, and follows every rule
// above; types left on ADS share one aggregated stream. Each stream's end
// is reported on its own, as on ADS ([Handler.OnStreamError]), with a
// [StreamError] that names that stream's types only and says whether the
// server had answered on it: the client stops the does-not-exist timers of
// those names until they are sent again and lets the other streams' run on.
// Whether the server as a whole is down (a stream failed without an
// answer, but another answered meanwhile) is the client's to judge, which
// sees every stream. The names of a type with no such service (a custom
// one) are reported unservable ([Handler.OnUnservable]).
//
// # REST-JSON polling
//
// With APITypeREST each type is polled on its own: POST
// <server_uri>/v3/discovery:listeners (:routes, :scoped-routes, :clusters,
// :endpoints, :secrets, :runtime) with a DiscoveryRequest in the proto3 JSON
// mapping, and a DiscoveryResponse back. The polls are the requests a SotW
// stream would carry: every one has the node, the names wanted, the version
// last accepted and, after a rejection, error_detail. One is outstanding at
// a time: the next goes out once the client has judged the previous answer
// (that poll is the ACK or NACK), a long-polling server may hold it until
// something changes, and a change of subscriptions abandons a held poll for
// a new one. HTTP 304 means nothing changed: the same poll goes out again
// after the server's RefreshDelay. Errors, and polls that exceed the
// RequestTimeout, back off as failed streams do ([Options].Backoff). Names
// count as sent (for the does-not-exist timers) once a poll carrying them
// was written to the server. A type with no endpoint, or nothing wanted
// (a poll naming nothing would ask for everything), is not polled.
//
// # Files
//
// With APITypeFilesystem each type is read from its file
// (bootstrap.ServerConfig.ResourceFiles): a DiscoveryResponse in binary
// protobuf, JSON, YAML or proto text, by extension or else by content. The
// file's content is a SotW response of its type, handed over whenever the
// file changes and again when names are added. Changes are seen on the
// file's directory (inotify on Linux, fsnotify elsewhere), so that files
// replaced by an atomic rename (the way to write them) and symlinks swapped
// under them (Kubernetes ConfigMaps) are seen; where the system cannot
// watch (a directory that does not exist yet: logged once), or with
// [Options].PollFiles, the files are looked at every RefreshDelay. A file
// is read only when complete: at once when it was replaced (renamed over,
// a symlink swapped), and when it changed in place (a shell's "> file", an
// editor saving over it) when its writer closes it, on Linux, however long
// the writer pauses; elsewhere, and when polled, once it has not changed
// for [Options].FileQuietPeriod. A half-written file is not taken for the
// configuration; the last content read stays in force meanwhile. There
// is no ACK or NACK, and no stream to fail: a file whose content cannot be
// read as a response is logged and every name of its type is reported
// unservable ([Handler.OnUnservable], matching [ErrContentRejected]), while
// the last valid configuration stays; so are the names of a file missing
// from the start, with the error of reading it, until it appears; a file
// deleted later changes nothing (logged), and is read again when it comes
// back; an empty file is taken for one being written.
//
// # Load reporting
//
// The Builder of NewBuilder is also a [LoadReportingBuilder]: it opens an
// LRS stream (envoy.service.load_stats.v3) to a gRPC server, on a channel of
// its own dialled as the server's ADS channel is, and sends the load a
// [LoadSource] gives at the interval the server asks for. It shares the
// ADS transport's backoff, not its state machine.
//
// # Structure
//
// The protocol logic (the per-type state and how it becomes requests) is
// apart from the code that moves messages, a small stream interface, so the
// variants share the runner that keeps streams alive: one runner per ADS
// transport, serving every type; one per type for per-type streams, and for
// REST, whose "stream" is a run of polls that lasts until one fails.
package transport
