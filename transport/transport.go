package transport

import (
	"errors"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// Transport carries the subscriptions of one client to one management server
// and the server's responses back. It owns the wire state (versions, nonces,
// what the server has been told) and nothing else: it knows no watchers and
// no cache.
type Transport interface {
	// UpdateSubscriptions adds and removes resource names of interest for a
	// type. A name may be a key made by [SubscriptionKey], for a
	// subscription with dynamic parameters: it goes on the wire as a
	// ResourceLocator (see locators.go), and is what OnSubscriptionsSent
	// and ResourceVersions speak of. It never blocks on the network. Changes made close together,
	// for one or many types, go out as one request per type. A name in both
	// lists is removed, then added again; if its removal has not reached the
	// server when it is added again, the server is told of the removal first,
	// so that it sends the resource anew.
	UpdateSubscriptions(typeURL string, add, remove []string)
	// Close stops the transport. Once it returns, no goroutine of the
	// transport is running and no Handler method will be called.
	Close()
}

// Handler is told what a transport learns. The client implements it. Its
// methods may be called concurrently from the transport's goroutines, but
// never while the transport holds a lock, so they may call back into the
// transport.
type Handler interface {
	// OnResponse hands over one response. The handler applies it and
	// returns nil to ACK it, or an error to NACK it; the error's text is
	// sent to the server as error_detail. The transport reads nothing more
	// from the stream until done has been called, which is how a client
	// makes a server wait while its watchers catch up.
	OnResponse(r *Response, done func()) error
	// OnSubscriptionsSent reports that a request naming these resources of
	// typeURL is on a live stream, so the server now knows the client wants
	// them. For SotW this is every name in the request; for delta the names
	// newly subscribed. It is the moment to start does-not-exist timers.
	OnSubscriptionsSent(typeURL string, names []string)
	// OnStreamError reports that a stream ended, or could not be started,
	// having answered or not: every transport reports each end of each of
	// its streams this way, and nothing else. The transport will retry
	// with backoff by itself. What the end means for watchers (gRFC A57: a
	// server that fails without answering is unreachable) is the
	// handler's to decide: a transport of several streams reports each on
	// its own and judges nothing across them.
	OnStreamError(err *StreamError)
	// OnUnservable reports that the transport cannot fetch these names of
	// typeURL, for a reason of its own rather than the server's word: the
	// server's API has no service for the type, or (FILESYSTEM) the type's
	// file is missing or cannot be read as a response. err says why,
	// naming the file where there is one; it matches [ErrContentRejected]
	// when content was read and rejected (the counterpart of a NACK). It is
	// no answer of the server and says nothing of its health; the names
	// stay subscribed, and are served if the transport later can. Each
	// subscription of a name is reported once per cause. names are the
	// keys subscribed, [SubscriptionKey]s included.
	OnUnservable(typeURL string, names []string, err error)
	// ResourceVersions returns the name and version of every resource of
	// typeURL the client holds. A delta transport sends them as
	// initial_resource_versions when it starts a new stream, so the server
	// can skip what the client already has.
	ResourceVersions(typeURL string) map[string]string
}

// StreamError is what [Handler.OnStreamError] is told when a stream ends.
// A transport with one stream per type reports each stream's end, so that
// the does-not-exist timers of the names it carried stop until the names
// are sent again (gRFC A57), while those of the other streams run on.
type StreamError struct {
	// Err is why the stream ended.
	Err error
	// Answered tells whether the server had sent a response on this
	// stream. The end is then routine (servers restart, proxies cut idle
	// streams); a stream that ends without one may mean the server is
	// down, unless another stream of the server answered meanwhile, which
	// the handler, seeing every stream, judges.
	Answered bool
	// TypeURLs are the types the stream carried: every type of the
	// transport for an aggregated stream without per-type overrides, the
	// stream's own types otherwise. Never empty.
	TypeURLs []string
}

func (e *StreamError) Error() string { return e.Err.Error() }

// ErrContentRejected is matched (errors.Is) by an error given to
// [Handler.OnUnservable] when the transport read content for the names and
// could not use it: a resource file that is not a valid response. Any
// other error means it could get nothing (no service for the type, a file
// missing).
var ErrContentRejected = errors.New("content rejected")

// contentRejected is an error of content the transport rejected: its text
// is the cause's, and it matches ErrContentRejected.
type contentRejected struct{ err error }

func (e contentRejected) Error() string   { return e.err.Error() }
func (e contentRejected) Unwrap() []error { return []error{ErrContentRejected, e.err} }

// Unwrap returns Err.
func (e *StreamError) Unwrap() error { return e.Err }

// Response is one DiscoveryResponse or DeltaDiscoveryResponse for one type.
type Response struct {
	// TypeURL is the response's type_url.
	TypeURL string
	// Version is version_info (SotW), or system_version_info (delta, for
	// debugging only).
	Version string
	// Nonce is the response's nonce.
	Nonce string
	// Delta tells a delta response from a SotW one. A SotW response is the
	// state of the world for its type, with the grouping rules of the type.
	Delta bool
	// Resources are the resources of a SotW response, plain or wrapped in
	// discovery.v3.Resource.
	Resources []*anypb.Any
	// DeltaResources are the resources of a delta response.
	DeltaResources []*discoveryv3.Resource
	// Removed names the resources a delta response deletes:
	// removed_resources, and the removed_resource_names without dynamic
	// parameter constraints. Either removes the variant of the name that
	// has no constraints.
	Removed []string
	// RemovedVariants are the removed_resource_names with constraints:
	// each removes the variant of its name with exactly those constraints.
	RemovedVariants []*discoveryv3.ResourceName
	// ResourceErrors are per-resource errors the server reported.
	ResourceErrors []*discoveryv3.ResourceError
	// ControlPlane is the identifier of the control plane instance that
	// sent the response (control_plane.identifier), "" if it gave none.
	ControlPlane string
}
