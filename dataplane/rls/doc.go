// Package rls is the data plane's route lookup (gRPC's RLS, gRFC A27, as
// the cluster specifier plugin of gRFC A28): a route whose action names a
// grpc.lookup.v1.RouteLookupClusterSpecifier plugin has the target of
// each request (for gRPC under xDS, a cluster) named by a route lookup
// service, from keys built out of the request. It owns everything about
// RLS but the lookup RPC and the clusters: the config, the keys, the
// cache, throttling, backoff, the default target and which targets are
// in use. It imports neither grpc-go nor net/http; an adapter gives it a
// [Lookuper] (the RPC over its transport: internal/rlsgrpc over a grpc-go
// channel) and a [Host] (its clusters: grpcxds's balancer).
//
// # Config
//
// [ParseClusterSpecifier] decodes the plugin's serialized config itself
// (the proto's Go type is internal to grpc-go) and validates it as gRPC
// does, so that a route configuration is accepted or rejected as
// grpc-go's xDS client decides: grpc_keybuilders required, each with
// names, each name with a service and a method without "/", no path
// named twice, no required_match, no key given twice; lookup_service
// required (whether the transport can reach it is the adapter's check);
// cache_size_bytes positive, capped at [MaxCacheSizeBytes]; max_age and
// stale_age capped at [MaxMaxAge] (stale_age at max_age, and only with
// max_age), both [MaxMaxAge] when unset; lookup_service_timeout
// [DefaultLookupServiceTimeout] when unset. http_keybuilders and
// valid_targets are ignored, as in gRPC.
//
// # Keys
//
// A request ([Request]: path "/service/method", the channel's host, a
// header view) is matched to the key builder that names its
// "/service/method", else its "/service/". The keys are: for each of the
// builder's headers, the value (values joined with ",") of the first of
// its names the request has; the extra keys host, service and method; the
// constant keys. A request no builder matches has no keys (and is still
// looked up). Requests with the same path and keys share a cache entry.
//
// # Picking
//
// [Policy.Pick] decides for one request:
//   - an answer for its keys that has not expired (max_age): its first
//     target that is not failing (the host says which), else its last; the
//     answer's header data goes with it. A stale answer (stale_age) is
//     also looked up again in the background (reason STALE).
//   - a lookup for the keys in flight, or a new one started (reason
//     MISS): the request waits ([Result.Queue]) until [Host.Repick].
//   - the keys' last lookup failed and is backing off, or the adaptive
//     throttle refuses a new one: the default target if the config has
//     one, else the request fails ([LookupError], [ErrThrottled]).
//
// A failed lookup (an error, or an answer without targets) backs off
// exponentially (from a second, by 1.6, to two minutes, ±20%); when the
// backoff ends the host is told to repick, and the next request looks up
// again; when the lookup service's channel becomes ready after a failure
// ([Dialer]'s backToReady), every backoff ends at once. The throttle is
// the SRE book's: over the last 30 seconds, a lookup is refused with
// probability (requests - 2·accepts) / (requests + 8), where accepts are
// the lookups the service took and answered, with targets or with an
// error ([AnswerError]: gRPC's NOT_FOUND, say, but not UNAVAILABLE,
// RESOURCE_EXHAUSTED or DEADLINE_EXCEEDED). (grpc-go v1.85 counts no
// answer, so its throttle never refuses.)
//
// # Cache
//
// Entries are bounded by cache_size_bytes, each counting its path, keys
// and header data; past the bound the least recently used go, except an
// answer younger than five seconds, which stops the eviction until
// later. Every minute the entries with neither a live answer nor a
// backoff in force (kept twice the backoff) are dropped.
//
// # Targets
//
// The Policy counts the targets in use: those of cached answers and the
// default target. The first use of a target is [Host.AddTarget] (grpcxds
// holds the cluster in its cluster.Holds, which has the config tree
// subscribe to it and the cluster Set build it); the last release, when
// the answers naming it are evicted or replaced, releases it at the host.
//
// # Concurrency
//
// A Policy's methods are safe for concurrent use. It calls the Host and
// the Lookuper with none of its locks held, except the failing predicate
// that Pick is given. Each lookup runs on a goroutine of its own; Close
// cancels them and waits for them, and stops every timer (given by
// [Options].Clock, which tests replace).
package rls
