package httpxds_test

import (
	"net/http"
	"testing"

	"github.com/goxds/xds/testutils"
)

// gRFC A92 on the HTTP server over TLS: the service is told the
// destination's principal, the identity of the certificate the server
// served (its DNS SAN), over mutual TLS, where the source's principal is
// the client's SPIFFE ID, and over TLS without client certificates, where
// the source has none; over HTTP/2 and HTTP/1.1. (Without TLS the
// destination has no principal: TestServerExtAuthz.)
func TestServerExtAuthzDestinationPrincipalOverTLS(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mutual     bool
		http1      bool
		wantSource string
	}{
		{name: "mutual TLS", mutual: true, wantSource: clientID},
		{name: "server certificate only", wantSource: ""},
		{name: "server certificate only, HTTP/1.1", http1: true, wantSource: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startAuthzServer(t)
			e := newTLSEnv(t, testutils.AllowGRPCService(a.Target()))
			l := e.listener(routes("rc", serveRoute(prefix("/"))), "", nil, testutils.ExtAuthzFilter(a.Target(), nil))
			downstreamTLS(l, tc.mutual, tc.mutual)
			e.serve(l)
			var cert *testutils.Cert
			if tc.mutual {
				cert = &e.client
			}
			hc := e.httpsClient(cert)
			if tc.http1 {
				hc.Transport.(*http.Transport).ForceAttemptHTTP2 = false
				hc.Transport.(*http.Transport).TLSClientConfig.NextProtos = []string{"http/1.1"}
			}
			resp, body, err := e.do(hc, "GET", "/x")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /x: %v %v %q", resp, err, body)
			}
			checks := a.Checks()
			if len(checks) != 1 {
				t.Fatalf("%d checks, want 1", len(checks))
			}
			attrs := checks[0].Request.GetAttributes()
			if s := attrs.GetRequest().GetHttp().GetScheme(); s != "https" {
				t.Errorf("scheme %q, want https", s)
			}
			if p := attrs.GetSource().GetPrincipal(); p != tc.wantSource {
				t.Errorf("source principal %q, want %q", p, tc.wantSource)
			}
			if p := attrs.GetDestination().GetPrincipal(); p != serverName {
				t.Errorf("destination principal %q, want the server certificate's DNS SAN %q", p, serverName)
			}
		})
	}
}
