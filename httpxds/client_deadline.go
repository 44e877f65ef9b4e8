package httpxds

import (
	"context"
	"time"

	"github.com/goxds/xds/internal/deadline"
)

// routeCtx is the context of a request whose application context is never
// cancelled (no Done channel: context.Background, its values,
// context.WithoutCancel): it carries the route's timeout itself, in the
// request's attempt allocation, rather than context.WithTimeout's seven
// allocations and ~300 bytes (internal/deadline says which), plus the map
// in which that context would keep net/http's own child context. Its
// AfterFunc method is how the context package links such a child to it
// without starting a goroutine per request. An application context that
// can be cancelled keeps context.WithTimeout.
type routeCtx struct {
	context.Context // the application's
	dl              deadline.Carrier
}

// Deadline implements context.Context: the route's.
func (c *routeCtx) Deadline() (time.Time, bool) { return c.dl.Deadline(), true }

// Done implements context.Context: closed at the route's timeout or when
// the request ends.
func (c *routeCtx) Done() <-chan struct{} { return c.dl.Done() }

// Err implements context.Context.
func (c *routeCtx) Err() error { return c.dl.Err() }

// AfterFunc arranges for f to run when c is done (see routeCtx).
func (c *routeCtx) AfterFunc(f func()) (stop func() bool) { return c.dl.AfterFunc(f) }

// withRouteTimeout is ctx bounded by timeout, and the func that ends it
// (as context.WithTimeout's): a's routeCtx when ctx is never cancelled.
func (a *attempt) withRouteTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if ctx.Done() != nil {
		return context.WithTimeout(ctx, timeout)
	}
	a.rctx.Context = ctx
	a.rctx.dl.Start(timeout)
	return &a.rctx, a.rctx.dl.End
}
