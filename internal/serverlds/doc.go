// Package serverlds is the Listener half that both xDS servers share
// (xdsserver for gRPC, httpxds for net/http), in gRFC A36's model: per
// listening address, the watch of the Listener that the bootstrap's
// server_listener_resource_name_template names, the check of its address,
// the RDS watches of the route configurations its filter chains name, the
// serving modes and their reports, and the swap of generations, one per
// Listener version, each served by a server of its own.
//
// What a server builds per Listener version is its own: a generation of
// type G (a grpc.Server for gRPC, an http.Server for HTTP), which a
// Listener starts, stops and hands connections to through the Server
// interface. Everything else, and the locking between the xDS client's
// callbacks, the accept loop and the stops, is here once.
//
// The model, as both servers follow it:
//   - A new Listener version waits until every route configuration its
//     chains name has been received (found or not), then becomes the
//     generation in force; the one it replaces drains (Server.Stop
//     gracefully).
//   - A Listener that does not exist, is rejected before any version was
//     accepted, is a client's (an api_listener) or is for another address
//     puts the address in the not-serving mode: no generation, and the
//     accept loop closes each connection. An ambient error (a management
//     server unreachable, an update rejected, a deletion that gRFC A88
//     says to ignore) keeps the version held and is logged.
//   - Mode changes are queued under the Listener's lock in the order they
//     happen and told one at a time with no lock held (Reporter).
//   - Config.Applied, a hook for a server's tests, hears each update once
//     it has been handled (routes and generation replaced), with no lock
//     held: tests wait on it for a configuration to take effect rather
//     than polling with requests.
//   - Config.Side, the server's side channels (internal/extauthzgrpc), is
//     told at the same point which side services the version in force
//     names, per listener, so that the channels none names close once
//     their calls end.
package serverlds
