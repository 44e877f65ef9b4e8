// Package transport carries an xDS client's subscriptions to a management
// server and the server's responses back, over one ADS stream per server.
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
// and sets error_detail. Wildcard is the name "*", always sent explicitly;
// an empty list is never the first request of a type, since the server would
// read it as the legacy wildcard.
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
// change and wakes the sender.
//
// # Flow control
//
// Each response is handed to [Handler.OnResponse], which returns the
// verdict. The reply goes out at once, but the next response is not read
// until the handler calls done, which the client does after its watchers
// have seen the change: a slow consumer slows the server, not the client's
// memory.
//
// # Streams and reconnection
//
// A stream starts when the first name is wanted. When it fails the
// transport reports it ([Handler.OnStreamError]) and starts a new one after
// an exponential backoff with jitter ([Options].Backoff, grpc's
// backoff.Config), reset once a stream has delivered a response. Two stream
// starts are never closer than [Options].MinStreamInterval, even after a
// healthy stream, so a server that answers once and hangs up cannot drive
// the client into a reconnect loop. On the new stream every subscription is
// sent again.
//
// # Structure
//
// The protocol logic (the per-type state and how it becomes requests) is
// apart from the code that moves messages, a small stream interface, so the
// variants share the runner that keeps streams alive: one runner per ADS
// transport, serving every type.
package transport
