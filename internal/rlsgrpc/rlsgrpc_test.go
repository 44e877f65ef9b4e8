package rlsgrpc

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/rls"
	"github.com/goxds/xds/testutils"
)

// A Channel's state watcher ends with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 10 * time.Second

// A lookup reaches the service with the request's target type, reason,
// keys and stale header data, and returns its targets and header data; a
// failed one returns the service's status.
func TestLookup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv, err := testutils.StartRLSServer(func(r testutils.RLSRequest) (testutils.RLSResponse, error) {
		if r.KeyMap["k"] == "bad" {
			return testutils.RLSResponse{}, status.Error(codes.NotFound, "no such key")
		}
		return testutils.RLSResponse{Targets: []string{"A", "B"}, HeaderData: "hd"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := Dial(srv.Address(), balancer.BuildOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Lookup(ctx, &rls.LookupRequest{TargetType: "grpc", KeyMap: map[string]string{"k": "v", "j": "w"}, Reason: rls.ReasonStale, StaleHeaderData: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Targets) != 2 || resp.Targets[0] != "A" || resp.Targets[1] != "B" || resp.HeaderData != "hd" {
		t.Errorf("answer %+v; want targets A, B and header data hd", resp)
	}
	got := srv.Requests()
	if len(got) != 1 || got[0].TargetType != "grpc" || got[0].Reason != "REASON_STALE" || len(got[0].KeyMap) != 2 || got[0].KeyMap["k"] != "v" || got[0].KeyMap["j"] != "w" {
		t.Errorf("requests received %+v; want one of target type grpc, reason STALE, keys k=v j=w", got)
	}
	_, err = c.Lookup(ctx, &rls.LookupRequest{TargetType: "grpc", KeyMap: map[string]string{"k": "bad"}, Reason: rls.ReasonMiss})
	var answered *rls.AnswerError
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "no such key") || !errors.As(err, &answered) {
		t.Errorf("failed lookup: %v; want the service's NOT_FOUND, as an *rls.AnswerError", err)
	}
	srv.Stop()
	_, err = c.Lookup(ctx, &rls.LookupRequest{TargetType: "grpc", KeyMap: map[string]string{"k": "v"}, Reason: rls.ReasonMiss})
	if status.Code(err) != codes.Unavailable || errors.As(err, &answered) {
		t.Errorf("lookup to a stopped service: %v; want UNAVAILABLE, not an answer", err)
	}
}

// A channel that failed to connect and then connects calls backToReady.
func TestBackToReady(t *testing.T) {
	srv, err := testutils.StartRLSServer(func(testutils.RLSRequest) (testutils.RLSResponse, error) {
		return testutils.RLSResponse{Targets: []string{"A"}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	var dials atomic.Int32
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		if dials.Add(1) == 1 {
			return nil, errors.New("the first dial fails")
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	ready := make(chan struct{}, 1)
	c, err := Dial(srv.Address(), balancer.BuildOptions{Dialer: dialer}, func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-ready:
	case <-time.After(testTimeout):
		t.Fatalf("backToReady not called after %d dials", dials.Load())
	}
}

// A lookup service's target must have a resolver grpc-go knows.
func TestCheckTarget(t *testing.T) {
	for _, target := range []string{"127.0.0.1:1", "dns:///rls.example.com:443", "passthrough:///x"} {
		if err := CheckTarget(target); err != nil {
			t.Errorf("CheckTarget(%q): %v", target, err)
		}
	}
	if err := CheckTarget("acme:///x"); err == nil || !strings.Contains(err.Error(), `scheme "acme"`) {
		t.Errorf(`CheckTarget("acme:///x"): %v; want an error naming the scheme`, err)
	}
}

// A response that is not one is refused, saying where.
func TestUnmarshalResponseRejects(t *testing.T) {
	for _, tt := range []struct {
		b    []byte
		want string
	}{
		{[]byte{0x1a, 0x05, 'A'}, "malformed protobuf at byte 1"},
		{[]byte{0x1a, 0x01, 0xff}, "field 3 at byte 1 is not valid UTF-8"},
		{[]byte{0xff}, "malformed protobuf at byte 0"},
	} {
		if _, err := unmarshalResponse(tt.b); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("unmarshalResponse(%x): %v; want an error containing %q", tt.b, err, tt.want)
		}
	}
}

// FuzzUnmarshalResponse: any bytes give an answer of UTF-8 strings or an
// error, and never a panic; an answer re-encoded decodes the same.
func FuzzUnmarshalResponse(f *testing.F) {
	f.Add([]byte("\x12\x02hd\x1a\x01A\x1a\x01B"))
	f.Fuzz(func(t *testing.T, b []byte) {
		resp, err := unmarshalResponse(b)
		if err != nil {
			return
		}
		var enc []byte
		enc = appendString(enc, responseHeaderData, resp.HeaderData)
		for _, target := range resp.Targets {
			enc = appendString(enc, responseTargets, target)
		}
		again, err := unmarshalResponse(enc)
		if err != nil || again.HeaderData != resp.HeaderData || len(again.Targets) != len(resp.Targets) {
			t.Errorf("re-encoded %+v decodes as %+v, %v", resp, again, err)
		}
	})
}
