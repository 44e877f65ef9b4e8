package httpfilter

import (
	"context"
	"errors"
	"fmt"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/resources"
)

// gRPC status codes by number: the data plane does not import grpc-go's
// codes package.
const (
	codeCanceled         = 1
	codeUnknown          = 2
	codeDeadlineExceeded = 4
	codeInternal         = 13
	codeUnauthenticated  = 16
)

// FaultAbortBody is the body an HTTP client answers a fault's abort with:
// Envoy's fault filter's
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/fault_filter).
const FaultAbortBody = "fault filter abort\n"

// faultRuntime runs the fault injection filter (gRFC A33; Envoy's HTTP
// fault filter): route.Faults draws whether a request is delayed, and
// aborted with what; here an abort becomes a Denial in both transports'
// terms. Nothing it starts lasts the request: its release is nil.
type faultRuntime struct {
	name   string
	faults *route.Faults
}

func (r faultRuntime) Start(ctx context.Context, config resources.HTTPFilterConfig, req Request) (func(), []extauthz.Mutation, *Denial) {
	cfg, ok := config.(*resources.FaultConfig)
	if !ok {
		msg := fmt.Sprintf("fault filter %q: config is a %T", r.name, config)
		return nil, nil, &Denial{Filter: r.name, Code: codeInternal, Message: msg, HTTPStatus: 500, Body: msg + "\n"}
	}
	abort, aborted, err := r.faults.Inject(ctx, cfg, req)
	if err != nil {
		code := uint32(codeCanceled)
		if errors.Is(err, context.DeadlineExceeded) {
			code = codeDeadlineExceeded
		}
		msg := fmt.Sprintf("request ended during the fault filter's delay: %v", err)
		// Envoy answers a request whose timeout fires before a response
		// with 504.
		return nil, nil, &Denial{Filter: r.name, Code: code, Message: msg, HTTPStatus: 504, Body: msg + "\n", Err: err}
	}
	if !aborted {
		return nil, nil, nil
	}
	return nil, nil, abortDenial(r.name, abort)
}

// abortDenial is a fault's abort: for gRPC the configured code, else the
// HTTP status header's by gRPC's HTTP mapping, else the gRPC status
// header's (Unknown for a code gRPC does not define); for HTTP the
// configured or header's HTTP status, else a gRPC error's answer.
func abortDenial(name string, a route.Abort) *Denial {
	d := &Denial{Filter: name, Body: FaultAbortBody}
	// code is typed as grpc-go's codes.Code, by resources, so that its name
	// reads in the message.
	code := resources.GRPCStatusToCode(codeUnknown)
	switch {
	case a.Config != nil:
		code, d.HTTPStatus = a.Config.Code, int(a.Config.HTTPStatus)
	case a.HTTPStatus != 0:
		code, _ = resources.HTTPStatusToCode(a.HTTPStatus)
		d.HTTPStatus = a.HTTPStatus
	case a.GRPCStatus >= 0 && a.GRPCStatus <= codeUnauthenticated:
		code = resources.GRPCStatusToCode(uint32(a.GRPCStatus))
	}
	d.Code = uint32(code)
	d.Message = fmt.Sprintf("fault injected: RPC aborted with status %v", code)
	return d
}
