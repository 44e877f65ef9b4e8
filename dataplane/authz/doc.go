// Package authz is the data plane's server-side authorization: it decides
// which filter chain of a server Listener serves a connection, and whether
// the RBAC rules of that chain's filter let a request through. It serves
// any server transport: package xdsserver binds it to grpc-go's server
// and package httpxds to net/http's, since a request is described
// here by plain fields (method, path, headers, addresses, the client's
// certificates) and the package imports neither grpc-go nor net/http.
//
// # Filter chains
//
// [FindFilterChain] picks the chain of a [resources.ServerListener] for a
// connection from its local and remote addresses, as gRFC A36 specifies:
// most specific destination prefix, then source type, source prefix and
// source port, else the default chain.
//
// # RBAC
//
// [Authorize] evaluates the [resources.RBACRules] of an RBAC filter or of
// its per-route override (gRFC A41) against a [Request], and hands the
// decision to the rules' audit loggers as their condition says (gRFC A59).
// What each permission and principal means is decided here: the
// authenticated name of a client is the URI SANs of its leaf certificate,
// else its DNS SANs, else its subject; IPv4-mapped addresses count as
// IPv4; the :path and :method headers are the request's path and method;
// metadata and the requested server name, which a gRPC server does not
// see, match as grpc-go's do (metadata never, unless inverted; the server
// name as if empty).
//
// # Division of work with package resources
//
// Package resources decodes and validates the configuration, so that the
// xDS client, which never imports the data plane, NACKs a Listener or a
// route configuration whose rules or chains a server could not use; it
// keeps the result as plain data ([resources.RBACRules],
// [resources.ServerListener.Entries]) with its matchers compiled. This
// package evaluates that data as it is: nothing is validated twice, and
// nothing is built per request or per connection. The audit loggers are
// built, once per decoded rules, by package resources from grpc-go's
// public audit logger registry, which also validates their configuration.
package authz
