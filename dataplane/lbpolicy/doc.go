// Package lbpolicy holds goxds's leaf load balancing policies: given the
// endpoints of one priority of a cluster, grouped in localities with
// their weights, they choose the endpoint of each request, whatever
// transport carries it. They are the policies of a cluster's
// load_balancing_policy (gRFC A52) as package resources decodes it:
//   - round_robin, and weighted_round_robin (gRFC A58), whose weights
//     come from the endpoints' load reports only, never from EDS
//     ([EndpointWeight]: QPS / (utilization + EPS/QPS × the error
//     utilization penalty), after a blackout period, until they expire;
//     an endpoint without one takes the mean), in a lock-free stride
//     schedule made anew every weight_update_period while picks come;
//   - ring_hash (gRFC A42), its ring built once per priority from the
//     endpoints' keys and weights, within the cluster's ring sizes and at
//     most [RingSizeCap] entries, and the request's hash (or the header
//     of requestHashHeader, gRFC A76: the caller's) choosing the point;
//   - least_request (gRFC A48), choice_count endpoints drawn at random,
//     the one with the fewest requests in flight taken;
//   - pick_first (gRFC A62), which connects its endpoints one at a time
//     in order (or shuffled by weight, gRFC A113): the next when the last
//     fails, or after its Happy Eyeballs turn ([HappyEyeballsDelay]); the
//     first ready is chosen, kept while ready, and across a configuration
//     change through [Leaf.Before]; its connection lost, the leaf goes
//     idle ([Leaf.Idle]: it wants nothing, and its picker answers
//     [ErrIdle]) until the owner calls [Leaf.ExitIdle] for a request,
//     which starts a new pass from the first endpoint (gRFC A62);
//   - wrr_locality over any of them (and the legacy ROUND_ROBIN): a
//     locality drawn by weight, earliest deadline first, so that each
//     locality's share is exact over any run of requests, then the
//     policy within it.
//
// # Outcomes beside gRPC's
//
// The outcomes are gRPC's, and these follow from them: round_robin and
// least_request do not weigh endpoints by their EDS weights; without
// wrr_locality a policy picks among all the endpoints of the priority,
// and locality weights count only where the policy weighs endpoints
// (ring_hash's ring, by locality share times endpoint share; pick_first's
// shuffle); under wrr_locality ring_hash has one ring per locality, by
// endpoint weights; weighted_round_robin spreads requests evenly until
// two endpoints have weights. One differs: pick_first that loses its
// ready endpoint starts again from the first endpoint at once, where
// gRPC's goes idle until the next request.
//
// # Use
//
// The owner (a cluster's priority) fills in a [Leaf]: the policy, the
// localities with their endpoints from package endpoint, outlier
// detection's [Ejector], for pick_first's Happy Eyeballs timer a
// [Clock] and a Repick callback, and what the leaves of the configuration
// before hand it ([Leaf.Carry], Before). Each time an endpoint's state changes it
// wants in the pool the endpoints [Leaf.Want] adds (every one, but under
// pick_first those it is trying or has chosen), and asks
// [Leaf.Picker] for a new [Picker]; a picker is immutable (but for
// its turn counters), safe for concurrent use, and never reads the pool.
// [Picker.Pick] returns a [Picked]: the endpoint, its connection as it
// was when the picker was built, and whether the pick counted a request
// in flight on it (least_request), which the caller ends with
// endpoint.Endpoint.CallFinished. Its errors are [ErrQueue] (hold the
// request for the next picker: gRPC's balancer.ErrNoSubConnAvailable),
// [ErrIdle] (hold it too, and have the leaf exit idle: the owner does so
// under its lock, never in the pick), or a reason to fail the request. The cluster layer (package
// dataplane/cluster) wraps a Picked in its own result with a Done that
// ends the count, which the transport adapter turns into its pick
// (grpcxds: the SubConn).
//
// weighted_round_robin's reports come from the transport: per request,
// the owner hands the report a response carried to [Picked.Load] (grpcxds:
// from balancer.DoneInfo.ServerLoad); out of band, an endpoint's
// connection that is a [LoadWatcher] starts its reports when it becomes
// ready (grpcxds's SubConns: grpc-go's orca.RegisterOOBListener). A
// configuration change keeps the weights of the endpoints still listed
// ([Leaf.Carry], Before), and the owner closes a leaf it lets go
// ([Leaf.Close]: its out-of-band watches and timers stop).
//
// A Leaf is guarded by its owner's lock, like the pool. pick_first's
// turn runs on its Clock and calls Repick, which takes the owner's lock;
// the timer does nothing else. weighted_round_robin's schedule updates
// run on the same Clock without the owner's lock: they read only the
// weights, each under its own lock, and store the picker's schedule
// atomically.
package lbpolicy
