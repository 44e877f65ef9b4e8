// Command goxds is the operator's and the control-plane author's tool for
// goxds: it checks a bootstrap, follows a listener's configuration tree from
// a management server, judges resources offline as a goxds client would,
// and reads a running service's xDS state over CSDS.
//
// Install it with
//
//	go install github.com/goxds/xds/cmd/goxds@latest
//
// # Usage
//
//	goxds bootstrap [-json] [file]
//	goxds watch -listener name [-bootstrap file] [-authority a] [-param k=v]... [-json] [-v]
//	goxds validate [-bootstrap file] [-type t] [-json] [-q] [-v] file...
//	goxds csds [-tls] [-ca file] [-cert file -key file] [-timeout d] [-json] host:port
//
// Every subcommand takes -h. Output goes to stdout; what goes wrong goes to
// stderr as one line, "goxds <command>: <what is wrong>".
//
// # bootstrap
//
// Loads a bootstrap as a client does (the file given, else the one
// GRPC_XDS_BOOTSTRAP or GRPC_XDS_BOOTSTRAP_CONFIG names), checks it, and
// prints what it means: the servers with their credentials, api_type and
// features, the node as the client sends it, the authorities and their
// servers, the listener name templates, the certificate providers (saying
// which cannot be built) and the fields it ignored as unknown, which may be
// typos. A bootstrap that does not load, or that a client refuses, is
// reported with the error naming the field, and the exit status is 1; with
// no bootstrap given or named by the environment it is 2.
//
// # watch
//
// Connects with a bootstrap (-bootstrap, else the environment as above),
// follows the listener's tree (listener → route configuration → virtual
// host → clusters → endpoints) and prints it, then each change as the lines
// that changed, until interrupted (Ctrl-C or SIGTERM end it with status
// 0). The tree is printed as watchers.Snapshot prints it. With -json every
// event is one JSON object on a line of its own, for scripts: its time, its
// kind ("snapshot", "resource_error", "ambient_error"), the error, and for
// a snapshot its tree as watchers.Snapshot.Tree gives it. A wrong command
// line or bootstrap ends it at once with status 2.
//
// # validate
//
// Judges resources as a goxds client would, without a server: each file
// holds a DiscoveryResponse (of Listeners, RouteConfigurations, Clusters,
// ClusterLoadAssignments, or any type goxds decodes), or one resource in an
// Any (JSON and YAML with "@type", proto text as [type_url] {...}), or,
// with -type, one bare resource of that type (listener, route, cluster,
// endpoints, or a type URL). Files are JSON, YAML, proto text or binary
// protobuf, by extension or else by content, read as goxds reads the files
// of a FILESYSTEM server; "-" is the standard input. A binary file holds a
// DiscoveryResponse unless -type is given.
//
// The response is handed to a real goxds client, built from the -bootstrap
// given (or a minimal one), that watches every resource it names, so the
// verdicts are the client's own: for each resource, accepted with its
// decoded value, or NACKed with the reason, and for the response the exact
// error_detail its NACK would carry (-q prints only what is not accepted,
// for large files). A resource whose name cannot be read is UNNAMED (a
// client watching by name never uses it), one whose name the bootstrap
// cannot serve (an xdstp:// authority it lacks) REFUSED, and a name the
// response's resource_errors report SERVER ERROR (gRFC A88: no NACK).
// Client and server Listeners are both judged; rules that depend on the bootstrap (its servers' features, its
// authorities, its certificate providers) are those of the -bootstrap.
//
// The exit status is 0 when every resource is accepted, 1 when some
// resource is NACKed or cannot be used, and 2 for a wrong command line or
// a file that cannot be read as resources.
//
// # csds
//
// Asks a running service's Client Status Discovery Service (goxds's,
// client/csds, and grpc-go's look the same) for its xDS clients' state and
// prints, for each client, its node and each resource's type, name,
// status, version and error (for a NACKed one, the version rejected). Plaintext
// unless -tls; -json prints the whole response, resource contents included,
// in the protobuf JSON mapping. A service that cannot be asked within
// -timeout is one line on stderr and status 1.
package main
