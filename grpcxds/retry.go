package grpcxds

import (
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/route"
)

// A route's retry policy (gRFC A44) is dataplane/route's: attempts,
// backoff, the retry_on conditions, by the bits grpcRetryOn gives gRPC's
// status codes, and the server's pushback (gRFC A6). What only gRPC knows
// is here: the attempt's status and pushback trailer, whether the server
// sent response headers, and whether the picker failed the RPC itself.

// pushbackHeader is the trailer in which a server tells a client how long
// to wait before the next attempt, or not to retry at all (gRFC A6).
const pushbackHeader = "grpc-retry-pushback-ms"

// retryNext decides whether an attempt that failed with err is retried by
// policy p, and after how long, as grpc-go decides: never once the server
// sent response headers (the attempt is committed) or for a failure the
// picker chose (a drop); else as route.RetryState.NextGRPC says of its
// status code and pushback.
func retryNext(p *route.RetryPolicy, rs *route.RetryState, err error, committed bool, trailer metadata.MD, sel *selection) (time.Duration, bool) {
	if committed || sel.statusPick.Load() {
		return 0, false
	}
	return rs.NextGRPC(p, uint(status.Code(err)), trailer[pushbackHeader], rand.Float64())
}
