package xdsserver_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"sync"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc/credentials/tls/certprovider"

	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// blockingPluginName is a certificate provider plugin whose Build blocks
// until its test releases it, as a plugin that fetches its certificate
// from a slow or unreachable authority would.
const blockingPluginName = "xdsserver-test-blocking"

func init() { certprovider.Register(blockingBuilder{}) }

// blockingBuilder is the plugin; each Build uses the blocking of the test
// running (only one at a time: certprovider is a process-wide registry).
type blockingBuilder struct{}

var (
	blockingMu  sync.Mutex
	blockingNow *blocking
)

func (blockingBuilder) Name() string { return blockingPluginName }

func (blockingBuilder) ParseConfig(cfg any) (*certprovider.BuildableConfig, error) {
	raw, _ := cfg.(json.RawMessage)
	return certprovider.NewBuildableConfig(blockingPluginName, raw, func(certprovider.BuildOptions) certprovider.Provider {
		blockingMu.Lock()
		b := blockingNow
		blockingMu.Unlock()
		b.builds <- struct{}{}
		<-b.released
		return blockingProvider{b}
	}), nil
}

// blocking is one test's view of the plugin: builds gets a value when a
// Build starts, released lets every Build return (at once once closed),
// closes gets a value when a provider built is closed. Its providers serve
// cert.
type blocking struct {
	cert           tls.Certificate
	builds, closes chan struct{}
	released       chan struct{}
	release        func()
}

// newBlocking makes the plugin block for this test. The test releases it,
// at the latest in a cleanup registered after its env's, so that it runs
// before the server's Stop: a server that builds in its xDS callback would
// have Stop wait for it.
func newBlocking(cert tls.Certificate) *blocking {
	b := &blocking{cert: cert, builds: make(chan struct{}, 8), closes: make(chan struct{}, 8), released: make(chan struct{})}
	var once sync.Once
	b.release = func() { once.Do(func() { close(b.released) }) }
	blockingMu.Lock()
	blockingNow = b
	blockingMu.Unlock()
	return b
}

// wait waits for a value on ch, the event what names.
func (e *env) wait(ch chan struct{}, what string) {
	e.t.Helper()
	select {
	case <-ch:
	case <-e.ctx.Done():
		e.t.Fatalf("%s: not before the test's deadline", what)
	}
}

type blockingProvider struct{ b *blocking }

func (p blockingProvider) KeyMaterial(context.Context) (*certprovider.KeyMaterial, error) {
	return &certprovider.KeyMaterial{Certs: []tls.Certificate{p.b.cert}}, nil
}

func (p blockingProvider) Close() { p.b.closes <- struct{}{} }

// A certificate provider plugin whose Build blocks holds up neither the
// server's xDS callbacks nor Stop: the providers are built, when the first
// TLS handshake asks for them, on a goroutine of their own, which ends
// once the plugin returns and closes what it built for a server that has
// stopped meanwhile; the handshake that waits ends with its generation.
func TestStopWhileACertificateProviderBlocks(t *testing.T) {
	pki := testutils.NewPKI(t)
	b := newBlocking(tls.Certificate{})
	e := newXDSCredsEnv(t, withBlockingProvider)
	t.Cleanup(b.release)
	te := &tlsEnv{env: e, pki: pki}
	lis := e.serverListener(nil, serverRoutes())
	downstreamTLS(lis, "blocking", false, false)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)
	te.dialTLS(false, nil).Connect()
	e.wait(b.builds, "the Listener's certificate provider built by a handshake")

	stopped := make(chan struct{})
	go func() {
		e.srv.Stop()
		close(stopped)
	}()
	// Stop closes a listener, its watches and the xDS client, and ends
	// the handshake waiting: milliseconds, even on a loaded machine.
	const stopWithin = 5 * time.Second
	select {
	case <-stopped:
	case <-time.After(stopWithin):
		t.Errorf("Stop has not returned %v after it was called, while a certificate provider's Build blocks", stopWithin)
	}
	b.release()
	select {
	case <-stopped:
	case <-e.ctx.Done():
		t.Fatal("Stop has not returned after the plugin did")
	}
	e.wait(b.closes, "the provider built for a server that has stopped closed")
}

// While a plugin's Build blocks, the server's xDS updates go on: a
// plaintext version of the Listener replaces the TLS one whose handshake
// waits for its provider, and is served; the provider, once built, is
// closed unused. A TLS version that comes next builds its own and is
// served over TLS with the plugin's certificate.
func TestBlockedProviderBuildDoesNotHoldUpUpdates(t *testing.T) {
	pki := testutils.NewPKI(t)
	b := newBlocking(pki.Issue("server", testutils.CertOptions{DNSNames: []string{serverName}}).TLS)
	e := newXDSCredsEnv(t, withBlockingProvider)
	t.Cleanup(b.release)
	te := &tlsEnv{env: e, pki: pki}
	secure := e.serverListener(nil, serverRoutes())
	downstreamTLS(secure, "blocking", false, false)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{secure}})
	e.waitMode(xdsserver.ServingModeServing)
	waiting := te.dialTLS(false, nil)
	waiting.Connect()
	e.wait(b.builds, "the first TLS version's provider built by a handshake")

	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, serverRoutes())}})
	if err := call(e.ctx, e.dial(), sayHello, waitForReady); err != nil {
		t.Errorf("the plaintext version, while the TLS one's provider is being built: %v", err)
	}
	waiting.Close()
	b.release()
	e.wait(b.closes, "the provider of the version replaced while it was built closed")

	secure.FilterChains[0].Name = "chain-2"
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{secure}})
	if err := call(e.ctx, te.dialTLS(false, nil), sayHello, waitForReady); err != nil {
		t.Errorf("the second TLS version: %v", err)
	}
	select {
	case m := <-e.modes:
		t.Errorf("serving mode changed to %v (%v) while a version replaced another", m.Mode, m.Err)
	default:
	}
}
