package httpxds

import (
	"context"
	"net/http"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// sendWithRetries runs attempts of req under policy (nil: one attempt).
//
// This is the seam's single-attempt version: the HTTP retry loop
// (retry_on, backoff, Retry-After, replayable bodies, per_try_timeout)
// replaces this file.
func sendWithRetries(ctx context.Context, req *http.Request, policy *routev3.RetryPolicy, attempt attemptFunc) (*http.Response, error) {
	return attempt(ctx, req, 0)
}
