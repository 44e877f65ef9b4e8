package resources

import (
	"fmt"
	"time"

	commonfaultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// faultName is the config message of the fault injection filter.
const faultName = "envoy.extensions.filters.http.fault.v3.HTTPFault"

// faultFilterType is the fault injection filter (gRFC A33): the same
// message configures it at the top level and in overrides, and an override
// replaces the top-level config whole.
var faultFilterType = HTTPFilterType{
	Name:          "fault",
	TypeURLs:      []string{"type.googleapis.com/" + faultName},
	ParseConfig:   parseFaultAny,
	ParseOverride: parseFaultAny,
	ClientSide:    true,
}

// FaultConfig is the parsed configuration of the fault injection filter
// (envoy.extensions.filters.http.fault.v3.HTTPFault) as gRPC applies it
// (gRFC A33): a delay, then an abort, each drawn with its own chance, at
// most MaxActiveFaults at a time.
//
// gRPC accepts every HTTPFault it can unmarshal; parts it cannot apply do
// nothing instead of making the resource invalid. So, as in gRPC: a fault
// without a percentage never fires; a delay that is not positive, and an
// abort without a status or with an HTTP status outside [200, 600), are
// left out (nil). Like A33, gRPC leaves for later, and this package does
// not model, the fields that select which requests are faulted (headers,
// upstream_cluster, downstream_nodes: a fault applies to every request its
// filter sees), the response rate limit, and the runtime keys; Raw has
// them.
type FaultConfig struct {
	// Delay delays requests before anything is sent; nil for none.
	Delay *FaultDelay
	// Abort fails requests before anything is sent (after any delay);
	// nil for none.
	Abort *FaultAbort
	// MaxActiveFaults caps how many requests may be in a fault at once;
	// nil means no cap, and 0 turns the filter off.
	MaxActiveFaults *uint32
	// Raw is the message as received.
	Raw *faultv3.HTTPFault
}

// FaultFraction is the chance that a fault applies: Numerator out of
// Denominator. Denominator is 100, 10,000 or 1,000,000 (an unknown
// denominator is read as 100, as gRPC does); Numerator is capped at
// Denominator. A header that sets the percentage sets a numerator over the
// same denominator.
type FaultFraction struct {
	Numerator, Denominator uint32
}

// FaultDelay is the delay part of a FaultConfig.
type FaultDelay struct {
	// FromHeader: each request's delay, in milliseconds, is read from its
	// x-envoy-fault-delay-request header (header_delay); no header, no
	// delay.
	FromHeader bool
	// Fixed is the delay when FromHeader is false; always positive then.
	Fixed time.Duration
	// Percentage is the chance a request is delayed.
	Percentage FaultFraction
}

// FaultAbort is the abort part of a FaultConfig.
type FaultAbort struct {
	// FromHeader: each request's status is read from its
	// x-envoy-fault-abort-request (HTTP status, preferred) or
	// x-envoy-fault-abort-grpc-request header (header_abort); no header,
	// no abort.
	FromHeader bool
	// Code is the status to fail with when FromHeader is false: grpc_status
	// (a code above 16 reads as Unknown), or http_status mapped as gRPC maps
	// HTTP statuses (HTTPStatusToCode). codes.OK ends the RPC at once with
	// status OK and no response, as gRPC does.
	Code codes.Code
	// HTTPStatus is http_status as configured, 0 when the abort gives a
	// gRPC status or comes from a header.
	HTTPStatus uint32
	// Percentage is the chance a request is aborted.
	Percentage FaultFraction
}

// HTTPStatusToCode maps the HTTP status of a fault abort to the gRPC status
// code gRPC fails the RPC with, by gRPC's HTTP-to-gRPC status mapping: 400
// Internal, 401 Unauthenticated, 403 PermissionDenied, 404 Unimplemented,
// 429, 502, 503 and 504 Unavailable, any other status in [200, 600)
// Unknown (200 too: a response without a gRPC status). ok is false for a
// status outside [200, 600), which gRPC ignores.
func HTTPStatusToCode(status int) (c codes.Code, ok bool) {
	if status < 200 || status >= 600 {
		return codes.Unknown, false
	}
	switch status {
	case 400:
		return codes.Internal, true
	case 401:
		return codes.Unauthenticated, true
	case 403:
		return codes.PermissionDenied, true
	case 404:
		return codes.Unimplemented, true
	case 429, 502, 503, 504:
		return codes.Unavailable, true
	}
	return codes.Unknown, true
}

// GRPCStatusToCode reads a configured gRPC status number: codes above 16,
// which gRPC does not define, read as Unknown.
func GRPCStatusToCode(status uint32) codes.Code {
	if status > uint32(codes.Unauthenticated) {
		return codes.Unknown
	}
	return codes.Code(status)
}

func parseFaultAny(a *anypb.Any) (HTTPFilterConfig, error) {
	if !anyIs(a, faultName) {
		return nil, fmt.Errorf("holds %s, want %s", anyName(a), faultName)
	}
	m := new(faultv3.HTTPFault)
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		return nil, fmt.Errorf("unmarshal HTTPFault: %v", err)
	}
	return NewFaultConfig(m), nil
}

// NewFaultConfig reads an HTTPFault as gRPC does; see FaultConfig for what
// it keeps. It never fails: gRPC accepts any HTTPFault.
func NewFaultConfig(m *faultv3.HTTPFault) *FaultConfig {
	fc := &FaultConfig{Raw: m}
	if d := m.GetDelay(); d != nil {
		fc.Delay = newFaultDelay(d)
	}
	if a := m.GetAbort(); a != nil {
		fc.Abort = newFaultAbort(a)
	}
	if maf := m.GetMaxActiveFaults(); maf != nil {
		v := maf.GetValue()
		fc.MaxActiveFaults = &v
	}
	return fc
}

func newFaultDelay(d *commonfaultv3.FaultDelay) *FaultDelay {
	fd := &FaultDelay{Percentage: faultFraction(d.GetPercentage())}
	switch spec := d.GetFaultDelaySecifier().(type) {
	case *commonfaultv3.FaultDelay_FixedDelay:
		// An invalid duration is clamped, as Duration.AsDuration does; one
		// that is not positive is no delay.
		fd.Fixed = spec.FixedDelay.AsDuration()
		if fd.Fixed <= 0 {
			return nil
		}
	case *commonfaultv3.FaultDelay_HeaderDelay_:
		fd.FromHeader = true
	default:
		return nil
	}
	return fd
}

func newFaultAbort(a *faultv3.FaultAbort) *FaultAbort {
	fa := &FaultAbort{Percentage: faultFraction(a.GetPercentage())}
	switch spec := a.GetErrorType().(type) {
	case *faultv3.FaultAbort_HttpStatus:
		c, ok := HTTPStatusToCode(int(spec.HttpStatus))
		if !ok {
			return nil
		}
		fa.Code, fa.HTTPStatus = c, spec.HttpStatus
	case *faultv3.FaultAbort_GrpcStatus:
		fa.Code = GRPCStatusToCode(spec.GrpcStatus)
	case *faultv3.FaultAbort_HeaderAbort_:
		fa.FromHeader = true
	default:
		return nil
	}
	return fa
}

// faultFraction normalises a fault's percentage; an absent one is 0%.
func faultFraction(p *typev3.FractionalPercent) FaultFraction {
	f := FaultFraction{Numerator: p.GetNumerator(), Denominator: 100}
	switch p.GetDenominator() {
	case typev3.FractionalPercent_TEN_THOUSAND:
		f.Denominator = 10000
	case typev3.FractionalPercent_MILLION:
		f.Denominator = 1000000
	}
	if f.Numerator > f.Denominator {
		f.Numerator = f.Denominator
	}
	return f
}
