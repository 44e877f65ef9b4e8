package xdsserver_test

import (
	"crypto/tls"
	"encoding/json"
	"math/big"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds/xdscreds"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// xdsServerCreds are xDS server credentials falling back to fallback.
func xdsServerCreds(t *testing.T, fallback credentials.TransportCredentials) grpc.ServerOption {
	t.Helper()
	c, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: fallback})
	if err != nil {
		t.Fatal(err)
	}
	return grpc.Creds(c)
}

// newEnvCreds is newEnvWith's env (no management server options) whose
// server has creds among its options (nil: no grpc.Creds at all).
func newEnvCreds(t *testing.T, creds grpc.ServerOption, edit func(*bootstrap.Config)) *env {
	t.Helper()
	return newEnvOpts(t, envOptions{edit: edit, server: func(e *env, cfg *bootstrap.Config) []grpc.ServerOption {
		opts := e.defaultOptions(cfg)
		if creds != nil {
			opts = append(opts, creds)
		}
		return opts
	}})
}

// newXDSCredsEnv is newEnvWith's env whose server has xDS server
// credentials with an insecure fallback: the Listener's TLS is honoured.
func newXDSCredsEnv(t *testing.T, edit func(*bootstrap.Config)) *env {
	t.Helper()
	return newEnvCreds(t, xdsServerCreds(t, insecure.NewCredentials()), edit)
}

// withBlockingProvider is a bootstrap edit that defines the instances
// "blocking" and "roots" with the test plugin of certprovider_test.go.
func withBlockingProvider(c *bootstrap.Config) {
	c.CertificateProviders = map[string]bootstrap.CertificateProvider{
		"blocking": {PluginName: blockingPluginName, Config: json.RawMessage(`{}`)},
		"roots":    {PluginName: blockingPluginName, Config: json.RawMessage(`{}`)},
	}
}

// A server made without xDS credentials does not act on the Listener's
// DownstreamTlsContext, as grpc-go's (its HandleListenerUpdate_NoXDSCreds):
// it serves with its own grpc.Creds, plaintext with insecure ones or none
// at all, and never builds the certificate providers the Listener names.
func TestServerWithoutXDSCredsIgnoresListenerTLS(t *testing.T) {
	for _, tc := range []struct {
		name  string
		creds grpc.ServerOption
	}{
		{"insecure credentials", grpc.Creds(insecure.NewCredentials())},
		{"no credentials", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBlocking(tls.Certificate{})
			b.release() // a Build, if any, returns at once and is counted
			e := newEnvCreds(t, tc.creds, withBlockingProvider)
			lis := e.serverListener(nil, serverRoutes())
			downstreamTLS(lis, "blocking", true, true)
			e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
			e.waitMode(xdsserver.ServingModeServing)
			if err := call(e.ctx, e.dial(), sayHello); err != nil {
				t.Fatalf("plaintext client of a server with %s, Listener asking for mTLS: %v", tc.name, err)
			}
			// The connection has been handshaken: a server that acted on
			// the DownstreamTlsContext would have built the provider by now.
			select {
			case <-b.builds:
				t.Errorf("the Listener's certificate provider was built by a server with %s", tc.name)
			default:
			}
		})
	}
}

// A server made with TLS credentials of its own serves TLS with its own
// certificate, whatever the Listener's DownstreamTlsContext asks: here a
// client certificate, which the caller's credentials do not require.
func TestServerWithTLSCredsUsesThemNotTheListeners(t *testing.T) {
	pki := testutils.NewPKI(t)
	own := pki.Issue("server", testutils.CertOptions{DNSNames: []string{serverName}})
	b := newBlocking(tls.Certificate{})
	b.release()
	e := newEnvCreds(t, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{own.TLS}})), withBlockingProvider)
	te := &tlsEnv{env: e, pki: pki}
	lis := e.serverListener(nil, serverRoutes())
	downstreamTLS(lis, "blocking", true, true)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)
	if err := call(e.ctx, te.dialTLS(false, nil), sayHello); err != nil {
		t.Fatalf("TLS client without a certificate, server with its own TLS credentials: %v", err)
	}
	refused(t, e.ctx, "plaintext client", e.dial())
	select {
	case <-b.builds:
		t.Error("the Listener's certificate provider was built by a server with TLS credentials of its own")
	default:
	}
}

// With xDS server credentials, a filter chain without a transport_socket
// is served by the fallback credentials: TLS ones here, so plaintext
// clients are refused. A chain with a DownstreamTlsContext is served with
// the chain's certificate instead, not the fallback's.
func TestXDSCredsFallbackServesChainWithoutTLS(t *testing.T) {
	pki := testutils.NewPKI(t)
	fallbackCert := pki.Issue("server", testutils.CertOptions{DNSNames: []string{serverName}})
	chainCert := pki.Issue("server", testutils.CertOptions{DNSNames: []string{serverName}})
	b := newBlocking(chainCert.TLS)
	b.release()
	fallback := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{fallbackCert.TLS}})
	e := newEnvCreds(t, xdsServerCreds(t, fallback), withBlockingProvider)
	te := &tlsEnv{env: e, pki: pki}

	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, serverRoutes())}})
	e.waitMode(xdsserver.ServingModeServing)
	// served gets the certificate each channel's first handshake saw.
	var served chan string
	seen := func(s *big.Int) {
		got := "unknown"
		switch {
		case s.Cmp(fallbackCert.Serial) == 0:
			got = "fallback"
		case s.Cmp(chainCert.Serial) == 0:
			got = "chain"
		}
		select {
		case served <- got:
		default:
		}
	}
	served = make(chan string, 1)
	if err := call(e.ctx, te.dialTLS(false, seen), sayHello); err != nil {
		t.Fatalf("TLS client, chain without TLS, TLS fallback: %v", err)
	}
	if got := <-served; got != "fallback" {
		t.Errorf("chain without TLS served with the %s certificate, want the fallback's", got)
	}
	refused(t, e.ctx, "plaintext client, chain without TLS, TLS fallback", e.dial())

	lis := e.serverListener(nil, serverRoutes())
	downstreamTLS(lis, "blocking", false, false)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	// The new version's connections are the chain's; the mode does not
	// change, so a channel opened at once may still reach the old version:
	// wait for the chain's certificate (the test's deadline bounds it).
	for {
		served = make(chan string, 1)
		conn := te.dialTLS(false, seen)
		if err := call(e.ctx, conn, sayHello, waitForReady); err != nil {
			t.Fatalf("TLS client, chain with TLS: %v", err)
		}
		conn.Close()
		if got := <-served; got == "chain" {
			break
		}
	}
}
