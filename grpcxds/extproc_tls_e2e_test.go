package grpcxds_test

import (
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/testutils"
)

// gRFC A102's TlsCredentials on an ext_proc GrpcService (gRFC A93): the
// processor is reached over mutual TLS with the bootstrap's certificates
// and its header change reaches the backend. Under roots that do not
// trust it the processing stream cannot start: the RPC fails with
// INTERNAL, or with failure_mode_allow goes on unprocessed. The processor
// requires a client certificate of its CA (testutils.SideTLS): a side
// channel without TLS, or without the bootstrap's identity, opens no
// stream, and the first case would fail with INTERNAL.
func TestExtProcClientTLSCredentials(t *testing.T) {
	side := testutils.NewSideTLS(t)
	p, streams := testutils.StartProcCounting(t, marking, side.ServerOption())
	for _, tc := range []struct {
		name  string
		roots string
		allow bool
		want  string // the echo; "" for INTERNAL
	}{
		{"tls", testutils.SideRoots, false, "echo:hi/in"},
		{"wrong roots", testutils.SideWrongRoots, false, ""},
		{"wrong roots failure_mode_allow", testutils.SideWrongRoots, true, "echo:hi/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := streams.Load()
			e := authzEnv(t, side.Bootstrap)
			res := tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", startEcho(t)))
			res.Listeners = []*listenerv3.Listener{listenerWithFilters(t, testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
				m.GetGrpcService().GetGoogleGrpc().ChannelCredentialsPlugin = []*anypb.Any{side.Creds(tc.roots)}
				m.FailureModeAllow = tc.allow
			}))}
			e.update(res)
			got, err := echo(e.ctx, e.dial(), "hi")
			opened := streams.Load() - before
			if tc.want == "" {
				if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "certificate") || opened != 0 {
					t.Fatalf("RPC: %q, %v, %d streams; want INTERNAL naming the certificate, no stream", got, err, opened)
				}
				return
			}
			wantStreams := int32(1)
			if tc.allow {
				wantStreams = 0
			}
			if err != nil || got != tc.want || opened != wantStreams {
				t.Fatalf("RPC: %q, %v, %d streams; want %q after %d streams", got, err, opened, tc.want, wantStreams)
			}
		})
	}
}
