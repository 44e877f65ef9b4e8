package extprocgrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/dataplane/extproc"
)

// TestStatus: a Call's *Status (wrapped too) becomes that gRPC status, a
// context's end gRPC's, anything else stays as it is.
func TestStatus(t *testing.T) {
	other := errors.New("other")
	for _, tc := range []struct {
		err      error
		code     codes.Code
		msg      string
		sameAsIn bool
	}{
		{err: fmt.Errorf("wrapped: %w", &extproc.Status{Code: uint32(codes.PermissionDenied), Message: "no"}), code: codes.PermissionDenied, msg: "no"},
		{err: context.Canceled, code: codes.Canceled},
		{err: context.DeadlineExceeded, code: codes.DeadlineExceeded},
		{err: other, sameAsIn: true},
	} {
		got := Status(tc.err)
		if tc.sameAsIn {
			if got != tc.err {
				t.Errorf("Status(%v) = %v, want it unchanged", tc.err, got)
			}
			continue
		}
		st := status.Convert(got)
		if st.Code() != tc.code || (tc.msg != "" && st.Message() != tc.msg) {
			t.Errorf("Status(%v) = %v, want code %v message %q", tc.err, got, tc.code, tc.msg)
		}
	}
}

// TestMarshalAndUnmarshalErrors: the errors of a message that is not a
// protocol buffer, or bytes that are not the message's type, are
// INTERNAL and start with the side's prefix.
func TestMarshalAndUnmarshalErrors(t *testing.T) {
	const prefix = "side: ext_proc"
	_, _, err := Marshal(prefix, "a request", "not a proto")
	if status.Code(err) != codes.Internal || !strings.HasPrefix(status.Convert(err).Message(), prefix+": a message of type string is not a protocol buffer") {
		t.Errorf("Marshal(string) = %v, want INTERNAL naming the type after %q", err, prefix)
	}
	m, b, err := Marshal(prefix, "a request", wrapperspb.String("v"))
	if err != nil || !proto.Equal(m, wrapperspb.String("v")) {
		t.Fatalf("Marshal(StringValue) = %v, %v", m, err)
	}
	out := NewLike(m)()
	if err := Unmarshal(prefix, "request", b, out); err != nil || !proto.Equal(out, m) {
		t.Errorf("Unmarshal = %v, %v; want %v", out, err, m)
	}
	err = Unmarshal(prefix, "response", []byte{0xff}, new(wrapperspb.StringValue))
	if status.Code(err) != codes.Internal || !strings.HasPrefix(status.Convert(err).Message(), prefix+": the processor's response message is not a google.protobuf.StringValue") {
		t.Errorf("Unmarshal(bad bytes) = %v, want INTERNAL naming the type after %q", err, prefix)
	}
}
