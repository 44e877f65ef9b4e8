package resources

import (
	"reflect"
	"testing"
	"time"

	commonfaultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func pct(n uint32, d typev3.FractionalPercent_DenominatorType) *typev3.FractionalPercent {
	return &typev3.FractionalPercent{Numerator: n, Denominator: d}
}

func fixedDelay(d time.Duration, p *typev3.FractionalPercent) *commonfaultv3.FaultDelay {
	return &commonfaultv3.FaultDelay{
		FaultDelaySecifier: &commonfaultv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(d)},
		Percentage:         p,
	}
}

func TestFaultConfigDelay(t *testing.T) {
	tests := []struct {
		name string
		in   *commonfaultv3.FaultDelay
		want *FaultDelay
	}{
		{"percent", fixedDelay(time.Second, pct(5, typev3.FractionalPercent_HUNDRED)),
			&FaultDelay{Fixed: time.Second, Percentage: FaultFraction{5, 100}}},
		{"per ten thousand", fixedDelay(time.Second, pct(5, typev3.FractionalPercent_TEN_THOUSAND)),
			&FaultDelay{Fixed: time.Second, Percentage: FaultFraction{5, 10000}}},
		{"per million", fixedDelay(time.Second, pct(5, typev3.FractionalPercent_MILLION)),
			&FaultDelay{Fixed: time.Second, Percentage: FaultFraction{5, 1000000}}},
		{"unknown denominator reads as percent", fixedDelay(time.Second, pct(5, 7)),
			&FaultDelay{Fixed: time.Second, Percentage: FaultFraction{5, 100}}},
		{"numerator above denominator capped", fixedDelay(time.Second, pct(250, typev3.FractionalPercent_HUNDRED)),
			&FaultDelay{Fixed: time.Second, Percentage: FaultFraction{100, 100}}},
		{"no percentage is never", fixedDelay(time.Second, nil),
			&FaultDelay{Fixed: time.Second, Percentage: FaultFraction{0, 100}}},
		{
			name: "from header",
			in: &commonfaultv3.FaultDelay{
				FaultDelaySecifier: &commonfaultv3.FaultDelay_HeaderDelay_{HeaderDelay: &commonfaultv3.FaultDelay_HeaderDelay{}},
				Percentage:         pct(50, typev3.FractionalPercent_TEN_THOUSAND),
			},
			want: &FaultDelay{FromHeader: true, Percentage: FaultFraction{50, 10000}},
		},
		{"zero delay is none", fixedDelay(0, pct(100, typev3.FractionalPercent_HUNDRED)), nil},
		{"negative delay is none", fixedDelay(-time.Second, pct(100, typev3.FractionalPercent_HUNDRED)), nil},
		{"no specifier is none", &commonfaultv3.FaultDelay{Percentage: pct(100, typev3.FractionalPercent_HUNDRED)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := NewFaultConfig(&faultv3.HTTPFault{Delay: tt.in})
			if !reflect.DeepEqual(fc.Delay, tt.want) {
				t.Errorf("Delay = %+v, want %+v", fc.Delay, tt.want)
			}
		})
	}
}

func TestFaultConfigAbort(t *testing.T) {
	hundred := pct(100, typev3.FractionalPercent_HUNDRED)
	httpAbort := func(s uint32) *faultv3.FaultAbort {
		return &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: s}, Percentage: hundred}
	}
	grpcAbort := func(s uint32) *faultv3.FaultAbort {
		return &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_GrpcStatus{GrpcStatus: s}, Percentage: hundred}
	}
	all := FaultFraction{100, 100}
	tests := []struct {
		name string
		in   *faultv3.FaultAbort
		want *FaultAbort
	}{
		{"http 503", httpAbort(503), &FaultAbort{Code: codes.Unavailable, HTTPStatus: 503, Percentage: all}},
		{"http 200 is unknown", httpAbort(200), &FaultAbort{Code: codes.Unknown, HTTPStatus: 200, Percentage: all}},
		{"http 418 is unknown", httpAbort(418), &FaultAbort{Code: codes.Unknown, HTTPStatus: 418, Percentage: all}},
		{"http 199 ignored", httpAbort(199), nil},
		{"http 600 ignored", httpAbort(600), nil},
		{"grpc invalid argument", grpcAbort(3), &FaultAbort{Code: codes.InvalidArgument, Percentage: all}},
		{"grpc ok", grpcAbort(0), &FaultAbort{Code: codes.OK, Percentage: all}},
		{"grpc 16", grpcAbort(16), &FaultAbort{Code: codes.Unauthenticated, Percentage: all}},
		{"grpc 17 is unknown", grpcAbort(17), &FaultAbort{Code: codes.Unknown, Percentage: all}},
		{
			name: "from header",
			in: &faultv3.FaultAbort{
				ErrorType:  &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}},
				Percentage: pct(7, typev3.FractionalPercent_MILLION),
			},
			want: &FaultAbort{FromHeader: true, Percentage: FaultFraction{7, 1000000}},
		},
		{"no status is none", &faultv3.FaultAbort{Percentage: hundred}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := NewFaultConfig(&faultv3.HTTPFault{Abort: tt.in})
			if !reflect.DeepEqual(fc.Abort, tt.want) {
				t.Errorf("Abort = %+v, want %+v", fc.Abort, tt.want)
			}
		})
	}
}

func TestFaultConfigMaxActiveFaults(t *testing.T) {
	if fc := NewFaultConfig(&faultv3.HTTPFault{}); fc.MaxActiveFaults != nil || fc.Delay != nil || fc.Abort != nil {
		t.Errorf("empty HTTPFault = %+v, want nothing set", fc)
	}
	for _, n := range []uint32{0, 5} {
		fc := NewFaultConfig(&faultv3.HTTPFault{MaxActiveFaults: wrapperspb.UInt32(n)})
		if fc.MaxActiveFaults == nil || *fc.MaxActiveFaults != n {
			t.Errorf("max_active_faults %d read as %v", n, fc.MaxActiveFaults)
		}
	}
}

// The same message is the top-level config and the override, and the
// fields gRPC does not apply are kept in Raw, not refused.
func TestFaultConfigParse(t *testing.T) {
	m := &faultv3.HTTPFault{
		Abort:           &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_GrpcStatus{GrpcStatus: 14}, Percentage: pct(1, typev3.FractionalPercent_HUNDRED)},
		UpstreamCluster: "c",
		DownstreamNodes: []string{"n"},
		ResponseRateLimit: &commonfaultv3.FaultRateLimit{
			LimitType: &commonfaultv3.FaultRateLimit_FixedLimit_{FixedLimit: &commonfaultv3.FaultRateLimit_FixedLimit{LimitKbps: 1}},
		},
	}
	for _, parse := range []func(*anypb.Any) (HTTPFilterConfig, error){faultFilterType.ParseConfig, faultFilterType.ParseOverride} {
		c, err := parse(toAny(m))
		if err != nil {
			t.Fatal(err)
		}
		fc, ok := c.(*FaultConfig)
		if !ok || fc.Abort == nil || fc.Abort.Code != codes.Unavailable || fc.Raw.GetUpstreamCluster() != "c" {
			t.Errorf("parsed %+v", c)
		}
	}
	_, err := faultFilterType.ParseOverride(toAny(&routerv3.Router{}))
	checkErr(t, err, "holds envoy.extensions.filters.http.router.v3.Router, want "+faultName)
}

func TestHTTPStatusToCode(t *testing.T) {
	tests := []struct {
		status int
		want   codes.Code
		ok     bool
	}{
		{199, codes.Unknown, false},
		{200, codes.Unknown, true},
		{400, codes.Internal, true},
		{401, codes.Unauthenticated, true},
		{403, codes.PermissionDenied, true},
		{404, codes.Unimplemented, true},
		{429, codes.Unavailable, true},
		{500, codes.Unknown, true},
		{502, codes.Unavailable, true},
		{503, codes.Unavailable, true},
		{504, codes.Unavailable, true},
		{599, codes.Unknown, true},
		{600, codes.Unknown, false},
	}
	for _, tt := range tests {
		if got, ok := HTTPStatusToCode(tt.status); got != tt.want || ok != tt.ok {
			t.Errorf("HTTPStatusToCode(%d) = %v, %v; want %v, %v", tt.status, got, ok, tt.want, tt.ok)
		}
	}
}
