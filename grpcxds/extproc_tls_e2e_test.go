package grpcxds_test

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/goxds/xds/testutils"
)

// gRFC A102's TlsCredentials on an ext_proc GrpcService (gRFC A93),
// XdsCredentials falling back to them, and an untrusted server's with
// allowed_grpc_services' "tls" credentials: the processor is reached over
// mutual TLS with the bootstrap's certificates and its header change
// reaches the backend. Under roots that do not trust it the processing
// stream cannot start: the RPC fails with INTERNAL naming the
// certificate, or with failure_mode_allow goes on unprocessed. The
// processor requires a client certificate of its CA (testutils.SideTLS):
// a side channel without TLS, or without the bootstrap's identity, opens
// no stream, and the reached cases would fail with INTERNAL. A trusted
// server's access token goes with the stream, as only TLS sends it.
func TestExtProcClientTLSCredentials(t *testing.T) {
	testutils.RunSideProc(t, marking, func(t *testing.T, tc testutils.SideTLSCase, p *testutils.ProcServer) {
		e := authzEnv(t, tc.Bootstrap(p.Target()))
		res := tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", startEcho(t)))
		res.Listeners = []*listenerv3.Listener{listenerWithFilters(t, testutils.ExtProcFilter(p.Target(), tc.ExtProc))}
		e.update(res)
		got, err := echo(e.ctx, e.dial(), "hi")
		tc.WantProc(t, got, err, p, "echo:hi/in", "echo:hi/")
	})
}
