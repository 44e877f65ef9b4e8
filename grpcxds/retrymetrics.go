package grpcxds

import (
	"strings"
	"time"

	"google.golang.org/grpc"
)

// RetryMetrics records what gRFC A96 measures of the retries a channel's
// xDS retry policies (gRFC A44) make. goxds retries in its interceptors,
// so gRPC's own stats handlers (grpc-go's OpenTelemetry plugin among
// them) see each attempt as a call of its own and cannot count a call's
// retries: the channel reports them here. Transparent retries (gRFC A6:
// gRPC's own, of an attempt that never reached the server's application)
// happen inside gRPC, below the interceptors, where goxds cannot see them:
// grpc.client.call.transparent_retries is not measured, nor hedging,
// which xDS does not configure.
//
// Implementations must be safe for concurrent use, and quick: they run on
// the RPC's goroutine as it ends.
type RetryMetrics interface {
	// CallRetried is called once at the end of each call that was retried:
	// retries is the attempts made less one (at least 1; a call with no
	// retry is not reported, as gRFC A96 says of
	// grpc.client.call.retries), delay the total time the call waited
	// between attempts (the backoffs and the server's pushbacks), for
	// grpc.client.call.retry_delay. target is the channel's canonical
	// target and method the call's full method without its leading "/"
	// ("pkg.Service/Method"): the grpc.target and grpc.method labels of
	// gRFC A66. A stream ends, for this report, when RecvMsg returns its
	// last error (io.EOF included) or the one response of a stream the
	// server does not stream; one the application abandons before that
	// (cancelling its context) is not reported.
	CallRetried(target, method string, retries int, delay time.Duration)
}

// recordRetries reports a call over after attempts attempts and delay
// spent between them, if it was retried and the channel measures retries.
func (cs *channelState) recordRetries(cc *grpc.ClientConn, method string, attempts int, delay time.Duration) {
	m := cs.b.retryMetrics
	if m == nil || attempts < 2 {
		return
	}
	m.CallRetried(cc.CanonicalTarget(), strings.TrimPrefix(method, "/"), attempts-1, delay)
}
