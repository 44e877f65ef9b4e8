// Package endpoint is the bottom layer of goxds's data plane: the pool of
// endpoints a channel (or an HTTP client) balances over, shared by every
// cluster and priority that names the same address list, whatever
// transport carries the requests.
//
// An [Endpoint] is an address list and what else sets a connection to it
// apart (the transport's security for it, passed to [Pool.Get] as an
// opaque extra key part), with its [State], its last connection error,
// its in-flight request count, its users and how many of them want it
// connected. The [Pool] keeps one per key and counts its references:
// [Pool.AddUser] and [Pool.RemoveUser] list it under a [User] (a cluster);
// [Pool.Want] and [Pool.Unwant] count the users that want it connected.
// The connection itself is the transport's: a [Dialer] makes a [Conn]
// when an endpoint is first wanted (grpcxds: a SubConn, through
// balancer.ClientConn.NewSubConn), and reports its states with
// [Pool.SetState].
//
// # Sharing and cost
//
// The sharing is what keeps a 10,000-cluster channel cheap: clusters that
// list the same backends share their connections, an update that keeps an
// endpoint keeps its connection, and a failover to a lower priority finds
// the endpoints it shares with the higher one already connected. What an
// update costs must grow with the change, not with the pool, so:
//   - an endpoint's users are one pointer until a second user lists it
//     (a map for each of tens of thousands of endpoints was a fifth of
//     what the balancer kept);
//   - an endpoint that loses its last user goes on an orphans list, and
//     [Pool.Prune] looks at those only (it is dropped unless a user took
//     it again meanwhile), never at every endpoint;
//   - the orphans map is made anew after it held many (a Go map keeps its
//     size once grown, and ranging over it costs that size).
//
// # State
//
// [State] is the pool's own, not grpc-go's: Idle, Connecting, Ready and
// TransientFailure. TransientFailure sticks until the connection is ready
// again, so that an endpoint that keeps failing does not look like one
// connecting each time the transport retries; [Endpoint.Reported] is the
// state the connection last reported, for a policy that must tell one
// failing now from one idle again after its backoff. A connection that
// goes idle while wanted is connected again at [Pool.Reconnect], which
// the owner calls once the users told of the change have chosen again
// what they want: pick_first that lost its endpoint wants nothing until a
// request asks (gRFC A62), and must not find it reconnected meanwhile.
// A connection let go ([Pool.Release], or the endpoint dropped) may still
// report before its shutdown: [Pool.SetState] ignores any report but from
// the endpoint's current connection.
//
// # Locking
//
// A Pool has no lock of its own: its owner's lock guards it (grpcxds: the
// balancer's mu), and every method needs that lock held, but the
// endpoints' in-flight counts, which pickers change without it. A change
// of an endpoint's state must mark its users for a new picker in the same
// critical section that applies it ([NewPool]'s changed is called
// there), and the users are the owner's state under that lock; a lock of
// the pool's, taken inside the owner's on every acquire (tens of
// thousands per configuration) and by every transport state report,
// would add a lock order to keep and gain no concurrency. Pickers never
// read the pool: they keep the endpoints' connections as they were when
// they were built.
//
// # Connection metrics
//
// gRFC A94's connection metrics (attempts succeeded and failed,
// disconnections with their reason, connections open, labelled with the
// leaf cluster and locality an endpoint was first listed under) are
// judged here, the same for every transport: a [ConnMeter] per
// connection takes the states the transport reports
// ([ConnMeter.Observe], [ConnMeter.Shut]) and returns what each ended
// as a [ConnEvent], which the transport reports once its lock is
// released ([ConnEvents] collects them). grpcxds feeds it its SubConns'
// states under the balancer's lock; httpxds each TCP connection's dial,
// handshake, errors and close.
//
// # Connection scaling
//
// gRFC A105 lets an endpoint have several connections, made as the
// server's MAX_CONCURRENT_STREAMS run out: the pool keeps each user's
// setting ([Pool.SetMaxConns], [Endpoint.MaxConns]), and a [Group] is
// the connections of one such endpoint and the choice among them: which
// takes a request, when another is made, which requests wait, and the
// endpoint's state. The transport makes the connections, reports their
// states and reads their limits ([StreamLimit]); grpcxds binds a Group
// to SubConns.
package endpoint
