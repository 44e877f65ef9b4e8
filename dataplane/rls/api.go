package rls

import (
	"context"
	"errors"
	"fmt"

	"github.com/goxds/xds/dataplane/lbpolicy"
)

// What a Policy needs of its adapter (a Lookuper, a Host, a Clock), and
// what a pick gives it.

// Clock is what a Policy needs of time (the data plane's one clock).
type Clock = lbpolicy.Clock

// Timer is a timer a Clock started.
type Timer = lbpolicy.Timer

// Reason says why a lookup is made (RouteLookupRequest.Reason).
type Reason int

const (
	// ReasonMiss: the cache has no answer for the keys.
	ReasonMiss Reason = 1
	// ReasonStale: the cache's answer is stale, and still used meanwhile.
	ReasonStale Reason = 2
)

// LookupRequest is a RouteLookupRequest.
type LookupRequest struct {
	// TargetType is the kind of target wanted: "grpc" for a gRPC
	// channel.
	TargetType string
	// KeyMap are the request's keys.
	KeyMap map[string]string
	Reason Reason
	// StaleHeaderData is the header data of the stale answer a
	// ReasonStale lookup refreshes.
	StaleHeaderData string
}

// LookupResponse is a RouteLookupResponse.
type LookupResponse struct {
	// Targets are where requests with the keys go, in order of
	// preference (for gRPC under xDS: cluster names).
	Targets []string
	// HeaderData is for the backends (gRPC: header x-google-rls-data).
	HeaderData string
}

// Lookuper makes lookups to one route lookup service: the adapter's
// channel to it.
type Lookuper interface {
	// Lookup sends req and returns the answer; ctx carries the lookup's
	// deadline, and is cancelled when the Policy closes. An error the
	// service answered with, having taken the lookup, is to be wrapped in
	// an *AnswerError; any other error counts as the service refusing
	// lookups, which the adaptive throttle answers by sending fewer.
	Lookup(ctx context.Context, req *LookupRequest) (*LookupResponse, error)
	// Close releases the channel once the Policy no longer uses it.
	Close()
}

// Dialer opens a Lookuper to the config's lookup service. backToReady is
// to be called, on any goroutine and with no lock held, when the channel
// becomes ready after a failure: the lookups backing off are then
// retried at once, as gRPC's RLS design asks.
type Dialer func(lookupService string, backToReady func()) (Lookuper, error)

// Host is what a Policy routes into: the adapter's clusters. The Policy
// calls it with none of its locks held.
type Host interface {
	// AddTarget tells the host that requests may be sent to target until
	// release is called (gRPC under xDS: the cluster is subscribed to and
	// built). Each call gets its own release.
	AddTarget(target string) (release func())
	// Repick tells the host that picks may have a new outcome (a lookup
	// was answered, a backoff ended): requests waiting for a pick are to
	// be picked again.
	Repick()
}

// Options configure a Policy. Host and Dial are required.
type Options struct {
	Host Host
	Dial Dialer
	// TargetType is LookupRequest.TargetType; "" is "grpc".
	TargetType string
	// Clock runs the expiry, backoff and purge timers; nil: real time.
	Clock Clock
	// Rand draws in [0, 1) for backoff jitter and throttling; nil:
	// math/rand/v2.
	Rand func() float64
}

// ErrThrottled is the pick error of a request whose lookup the adaptive
// throttle refused, when there is no default target.
var ErrThrottled = errors.New("rls: lookup throttled by client-side adaptive throttling")

// AnswerError is a lookup's error that the service answered with after
// taking the lookup (gRPC: a status other than UNAVAILABLE,
// RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED, e.g. NOT_FOUND for keys it has
// no target for): the throttle counts the lookup as accepted, as it does
// an answer. The lookup still failed, and backs off.
type AnswerError struct{ Err error }

// Error is the service's answer.
func (e *AnswerError) Error() string { return e.Err.Error() }

// Unwrap gives the service's answer.
func (e *AnswerError) Unwrap() error { return e.Err }

// LookupError is the pick error of a request whose keys' last lookup
// failed and is backing off, when there is no default target. gRPC fails
// such a request UNAVAILABLE, with the lookup's error in the message but
// not its code.
type LookupError struct{ Err error }

// Error gives the last lookup's error, in the words gRPC uses.
func (e *LookupError) Error() string {
	return fmt.Sprintf("most recent error from the route lookup service: %v", e.Err)
}

// Unwrap gives why the lookup failed.
func (e *LookupError) Unwrap() error { return e.Err }

// Result is the outcome of a pick.
type Result struct {
	// Queue: no answer yet; the request waits for Host.Repick.
	Queue bool
	// Err fails the request (ErrThrottled, a *LookupError, or an
	// invalid path).
	Err error
	// Target is where the request goes, with HeaderData for the backend;
	// Default says it is the default target, which carries no header
	// data.
	Target     string
	HeaderData string
	Default    bool
}
