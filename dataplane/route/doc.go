// Package route is the request-routing layer of goxds's data plane: from a
// virtual host (and the listener it came from) and one request it chooses
// what the request does, for any transport. It imports nothing of grpc-go
// or net/http; an adapter (grpcxds for gRPC channels, httpxds for its
// HTTP client and server) gives it a request and turns its answers into
// the transport's terms.
//
// For one request ([Request]: path, a header view, the caller's identity
// for hashing) a [Table], made once per configuration, decides
// ([Table.Route]):
//
//   - the route: the first of the virtual host's routes that matches
//     (gRFC A28: path, headers, runtime fraction; query parameters are
//     the transport's to give, and a gRPC request has none). Which headers
//     a request shows, and how repeated ones join, is the adapter's
//     [Headers] view; gRPC's is [GRPCHeaders], which hides "-bin" headers
//     and shows content-type as "application/grpc".
//   - the cluster: the route's, or one of its weighted clusters drawn by
//     weight, once per request (gRFC A31: every attempt of the request
//     keeps it), or the name of the cluster specifier plugin that picks it
//     (gRFC A28: gRPC's RLS plugin).
//   - the request hash for ring_hash (gRFC A42): the route's hash
//     policies, header (with regex rewrite) and channel ID; a request no
//     policy hashes gets a random hash. [HeaderHash] is ring_hash's
//     request_hash_header (gRFC A76).
//   - the request's policy: the retry policy (gRFC A44: attempts, backoff
//     from base_interval, 25 ms by default, doubling to max_interval, ten
//     times the base by default, times a jitter of 0.8 to 1.2; the
//     retry_on conditions the adapter knows, as bits it
//     assigns: which failure matches which condition is the adapter's;
//     for gRPC, whose bits are its status codes, [RetryState.NextGRPC]
//     decides from an attempt's code and the server's pushback, gRFC A6);
//     the HTTP filters to run with their per-route overrides resolved
//     (gRFC A39: weighted cluster, then route, then virtual host);
//     and [GRPCTimeout], the deadline gRFC A31 sets for gRPC (HTTP's
//     route.timeout is another rule, for its adapter).
//
// Authority rewriting (gRFC A81) is the route's: [resources.Route]'s
// AutoHostRewrite, set only from a trusted server. Only the adapter knows
// the endpoint a request is sent to, so it applies it: the request then
// carries the endpoint's hostname as its authority.
//
// An HTTP client's retries are decided here too, with Envoy's semantics
// (a Table of Options.HTTP, whose [Table.RetryPolicyOf] gives the policy
// of a route matched by [MatchHTTP]): the conditions of x-envoy-retry-on for HTTP
// (5xx, gateway-error, reset, connect-failure, retriable-4xx,
// refused-stream, retriable-status-codes, retriable-headers,
// envoy-ratelimited; other names ignored, as Envoy ignores them) against
// what an attempt gave ([HTTPAttempt]: a status and headers, or a
// [Failure]); num_retries; Envoy's fully jittered back-off; the
// rate-limited back-off of reset headers (Retry-After in seconds, or an
// HTTP date where Envoy reads seconds only; X-RateLimit-Reset as a Unix
// time; [ParseResetHeader]); retriable_request_headers; and the
// per-attempt timeouts the adapter enforces ([HTTPRetry]). What is
// transport's stays the adapter's: telling a connection failure from a
// reset, replaying the body, waiting.
//
// Fault injection (gRFC A33) is decided here too ([Faults]): the delay and
// the abort, each with its own draw, header-controlled delays, aborts and
// percentages, and the process's cap on active faults; the adapter turns
// an [Abort] into its status (a gRPC status code, an HTTP status).
//
// Errors are typed ([*Error]: no route, a route that does not forward, a
// route naming no cluster, a cluster not configured) so that each adapter
// reports them in its own terms.
//
// What a decision costs matters: it runs on every request. A Table parses
// each route's policy once, on the route's first request, and a decision
// allocates nothing but what the caller passes in.
package route
