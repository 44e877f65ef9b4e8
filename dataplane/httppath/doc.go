// Package httppath normalizes an HTTP request's path before routing and
// HTTP filters (RBAC) see it, as Envoy's HttpConnectionManager does with
// its normalize_path, merge_slashes and path_with_escaped_slashes_action
// fields. It is transport-neutral: it reads and returns the path as the
// request target spells it (percent-encoded, without the query), and the
// adapter (package httpxds) answers what [Normalize] decides.
//
// Why it matters: routing and RBAC must judge the path the handler serves.
// "/admin", "//admin", "/./admin", "/%61dmin" and "/public/../admin" name
// one resource to most handlers (Go's net/http decodes "%61", and routers
// clean dot segments or redirect to the cleaned path), so a policy that
// denies "/admin" must deny them all: after normalization each is
// "/admin". The adapter then serves the handler the normalized path, as
// Envoy forwards the normalized :path upstream, so that what was judged is
// what is served.
//
// # The rules
//
// Envoy's HttpConnectionManager, in Envoy's order
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto):
//
//  1. path_with_escaped_slashes_action on %2F, %2f, %5C and %5c: kept,
//     the request refused, or unescaped ("/" and "\") with the request
//     going on or redirected to the new path. The redirect is decided
//     last, after the steps below, as Envoy's doc says ("Redirect occurs
//     after path normalization and merge slashes transformations").
//  2. normalize_path: RFC 3986 normalization (section 6.2.2): a
//     percent-encoded unreserved character (ALPHA, DIGIT, "-", ".", "_",
//     "~") is decoded, other percent-encodings get upper-case hex digits, a
//     backslash is a slash (as in Chromium's URL library, whose path
//     canonicalization Envoy's uses), bytes outside ASCII are
//     percent-encoded, and dot segments are removed (section 5.2.4; ".."
//     above the root stays at the root).
//  3. merge_slashes: runs of "/" become one.
//
// A path that cannot be normalized is an error (the adapter answers 400,
// as Envoy does for a path that fails normalization): empty or not
// starting with "/", a "%" not followed by two hex digits, a control
// character, or a fragment ("#", which Envoy refuses in a path by
// default).
//
// # Defaults (Resolve)
//
// Where the Listener leaves a field unset, Envoy's default is its
// service-mesh default, chosen for a proxy whose upstream sees the same
// bytes; here the "upstream" is a Go handler in the same process that
// decodes and cleans the path itself. goxds therefore takes the values
// Envoy's edge guide recommends for a proxy that routes or applies RBAC by
// path (https://www.envoyproxy.io/docs/envoy/latest/configuration/best_practices/edge:
// "Enable normalize_path setting. Enable merge_slashes setting.") where
// that closes a bypass:
//
//   - normalize_path unset: on (Envoy: off unless its runtime key
//     http_connection_manager.normalize_path says otherwise). An explicit
//     false is obeyed, as in Envoy: the path is then judged as received.
//   - merge_slashes: always on. The field is a plain bool, so false cannot
//     be told from unset, and "//admin" must not pass a policy that
//     "/admin" would not. (Envoy: off by default.)
//   - path_with_escaped_slashes_action unset (IMPLEMENTATION_SPECIFIC_DEFAULT):
//     KEEP_UNCHANGED, Envoy's default. Go decodes "%2F" into URL.Path, so
//     a handler that cleans URL.Path itself could see "/a%2F..%2Fb" as
//     "/b": set REJECT_REQUEST or UNESCAPE_AND_REDIRECT, as the edge
//     guide recommends, when handlers do.
package httppath
