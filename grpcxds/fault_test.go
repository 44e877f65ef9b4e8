package grpcxds

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/dataplane/httpfilter"
)

// A filter's denial as the RPC's error: its code and message; a fault's
// abort with status OK as errFaultAbortOK; a context that ended during a
// fault's delay as gRPC ends it; a denial's headers as the RPC's trailers.
// (The filters' runtimes and their tests are dataplane/httpfilter's.)
func TestDenialError(t *testing.T) {
	err := denialError(&httpfilter.Denial{Code: uint32(codes.Unavailable), Message: "fault injected: RPC aborted with status Unavailable"})
	if s := status.Convert(err); s.Code() != codes.Unavailable || s.Message() != "goxds: fault injected: RPC aborted with status Unavailable" {
		t.Errorf("abort: %v", err)
	}
	if err := denialError(&httpfilter.Denial{Code: uint32(codes.OK)}); !errors.Is(err, errFaultAbortOK) {
		t.Errorf("abort with OK = %v, want errFaultAbortOK", err)
	}
	for ctxErr, want := range map[error]codes.Code{context.DeadlineExceeded: codes.DeadlineExceeded, context.Canceled: codes.Canceled} {
		if err := denialError(&httpfilter.Denial{Code: uint32(codes.Internal), Err: ctxErr}); status.Code(err) != want {
			t.Errorf("context ended with %v: %v, want %v", ctxErr, err, want)
		}
	}
	err = denialError(&httpfilter.Denial{Code: uint32(codes.PermissionDenied), Message: "denied", Headers: []extauthz.Mutation{{Key: "x-why", Value: "quota"}}})
	var trailer metadata.MD
	err = deliverDenial(err, []grpc.CallOption{grpc.Trailer(&trailer)})
	if status.Code(err) != codes.PermissionDenied || len(trailer.Get("x-why")) != 1 {
		t.Errorf("denial with headers: %v, trailer %v", err, trailer)
	}
}
