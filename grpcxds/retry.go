package grpcxds

import (
	"math/rand/v2"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/route"
)

// A route's retry policy (gRFC A44) is dataplane/route's: attempts,
// backoff, the retry_on conditions, by the bits grpcRetryOn gives gRPC's.
// What gRPC retries is here: a status code of the policy, an attempt that
// got no response header, a failure not the picker's, and the server's
// pushback (gRFC A6).

// pushbackHeader is the trailer in which a server tells a client how long
// to wait before the next attempt, or (a negative or malformed value) not
// to retry at all (gRFC A6).
const pushbackHeader = "grpc-retry-pushback-ms"

// retryNext decides whether an attempt that failed with err is retried by
// policy p, and after how long, as grpc-go decides: only a status the
// policy names, only if the server sent no response headers (the attempt
// is not committed), not a failure the picker chose (a drop), not past the
// attempts allowed; the server's pushback wins over the backoff, and a
// malformed pushback ends the retries.
func retryNext(p *route.RetryPolicy, rs *route.RetryState, err error, committed bool, trailer metadata.MD, sel *selection) (time.Duration, bool) {
	if committed || sel.statusPick.Load() {
		return 0, false
	}
	code := status.Code(err)
	if code > codes.Unauthenticated || !p.RetriesOn(uint(code)) {
		return 0, false
	}
	pushback, hasPushback := time.Duration(0), false
	switch vs := trailer[pushbackHeader]; len(vs) {
	case 0:
	case 1:
		ms, perr := strconv.Atoi(vs[0])
		if perr != nil || ms < 0 {
			return 0, false
		}
		pushback, hasPushback = time.Duration(ms)*time.Millisecond, true
	default:
		return 0, false
	}
	return rs.Next(p, pushback, hasPushback, rand.Float64())
}
