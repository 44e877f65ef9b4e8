package httpfilter

import (
	"context"
	"fmt"
	"time"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// authzRuntime runs the external authorization filter (gRFC A92; Envoy's
// ext_authz HTTP filter) on a transport's requests: dataplane/extauthz
// decides, over a client of the service the transport's AuthzClients
// gives.
type authzRuntime struct {
	name string
	// top is the filter's top-level configuration, which an
	// ExtAuthzPerRoute override keeps.
	top     resources.HTTPFilterConfig
	clients AuthzClients
	// perRoute: ExtAuthzPerRoute's fields apply (Env.AuthzPerRoute).
	perRoute bool
	// now is the clock of the request's time; nil: time.Now.
	now func() time.Time
}

// Start checks the request. An allowed request goes on with the header
// changes the service made (through req.MutateHeaders, so that later
// filters see them), and the service's response headers to add are
// returned. A denied one ends with the service's status, body and
// headers; one the service could not decide with status_on_error, unless
// failure_mode_allow lets it on.
func (r *authzRuntime) Start(ctx context.Context, config resources.HTTPFilterConfig, req Request) (func(), []extauthz.Mutation, *Denial) {
	var contextExtensions map[string]string
	if pr, ok := config.(*resources.ExtAuthzPerRouteConfig); ok && r.perRoute {
		// Envoy's ExtAuthzPerRoute
		// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/http/ext_authz/v3/ext_authz.proto):
		// disabled turns the filter off for the route; the route's
		// context_extensions go to the service with the check.
		if pr.Raw.GetDisabled() {
			return nil, nil, nil
		}
		contextExtensions = pr.Raw.GetCheckSettings().GetContextExtensions()
	}
	c, err := resources.ExtAuthzOf(config, r.top)
	if err != nil {
		msg := fmt.Sprintf("ext_authz filter %q: %v", r.name, err)
		return nil, nil, &Denial{Filter: r.name, Code: codeInternal, Message: msg, HTTPStatus: 500, Body: msg + "\n"}
	}
	areq := req.AuthzRequest()
	if r.now != nil {
		areq.Time = r.now()
	} else {
		areq.Time = time.Now()
	}
	d := (&extauthz.Checker{Config: c, Client: r.client(c.GrpcService, contextExtensions)}).Check(ctx, &areq)
	if o, ok := req.(AuthzObserver); ok {
		o.AuthzChecked(d.Outcome)
	}
	if !d.Allow {
		body := d.Body
		if d.Outcome != extauthz.Denied {
			// The service did not answer: the body says why, for the
			// application that reads it (Envoy's is empty).
			body = d.Message + "\n"
		}
		return nil, nil, &Denial{Filter: r.name, Code: d.Code, Message: d.Message, HTTPStatus: d.HTTPStatus, Body: body, Headers: d.Trailers}
	}
	if len(d.RequestHeaders) > 0 {
		req.MutateHeaders(d.RequestHeaders)
	}
	return nil, d.ResponseHeaders, nil
}

// AuthzObserver is a Request whose transport counts its ext_authz checks
// (gRFC A92's metrics): each check's outcome is handed to AuthzChecked
// once, on the request's goroutine, as the check ends. A route that turns
// the filter off makes no check, and no call.
type AuthzObserver interface {
	Request
	AuthzChecked(outcome extauthz.Outcome)
}

// client is the client of gs's service, whose checks carry
// contextExtensions if any; one that fails every check with the reason
// when none can be had, for the failure mode to decide.
func (r *authzRuntime) client(gs *resources.GrpcService, contextExtensions map[string]string) extauthz.Client {
	if r.clients == nil {
		return extauthz.FailingClient(fmt.Errorf("no channel to the authorization service %q can be made here", gs.TargetURI))
	}
	var cl extauthz.Client
	var err error
	if cc, ok := r.clients.(AuthzContextClients); ok && len(contextExtensions) > 0 {
		cl, err = cc.ClientWithContext(gs, contextExtensions)
	} else {
		cl, err = r.clients.Client(gs)
	}
	if err != nil {
		return extauthz.FailingClient(err)
	}
	return cl
}
