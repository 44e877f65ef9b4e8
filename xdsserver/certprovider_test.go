package xdsserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc/credentials/tls/certprovider"

	"github.com/goxds/xds/bootstrap"
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
		close(b.entered)
		<-b.released
		return blockingProvider{b}
	}), nil
}

// blocking is one test's view of the plugin: entered is closed when Build
// starts, released lets it return, closed is closed when the provider it
// returned is closed.
type blocking struct {
	entered, released, closed chan struct{}
	release                   func()
}

// newBlocking makes the plugin block for this test. The test releases it,
// at the latest in a cleanup registered after its env's, so that it runs
// before the server's Stop: a server that builds in its xDS callback would
// have Stop wait for it.
func newBlocking() *blocking {
	b := &blocking{entered: make(chan struct{}), released: make(chan struct{}), closed: make(chan struct{})}
	var once sync.Once
	b.release = func() { once.Do(func() { close(b.released) }) }
	blockingMu.Lock()
	blockingNow = b
	blockingMu.Unlock()
	return b
}

type blockingProvider struct{ b *blocking }

func (blockingProvider) KeyMaterial(context.Context) (*certprovider.KeyMaterial, error) {
	return nil, errors.New("the blocking test provider has no key material")
}

func (p blockingProvider) Close() { close(p.b.closed) }

// A certificate provider plugin whose Build blocks holds up neither the
// server's xDS callbacks nor Stop: the providers are built on a goroutine
// of their own, which ends once the plugin returns, and closes what it
// built for a server that has stopped meanwhile.
func TestStopWhileACertificateProviderBlocks(t *testing.T) {
	b := newBlocking()
	e := newEnvWith(t, testutils.ManagementServerOptions{}, func(c *bootstrap.Config) {
		c.CertificateProviders = map[string]bootstrap.CertificateProvider{
			"blocking": {PluginName: blockingPluginName, Config: json.RawMessage(`{}`)},
		}
	})
	t.Cleanup(b.release)
	lis := e.serverListener(nil, serverRoutes())
	downstreamTLS(lis, "blocking", false, false)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	select {
	case <-b.entered:
	case <-e.ctx.Done():
		t.Fatal("the Listener's certificate provider was never built")
	}

	stopped := make(chan struct{})
	go func() {
		e.srv.Stop()
		close(stopped)
	}()
	// Stop closes a listener, its watches and the xDS client: milliseconds,
	// even on a loaded machine.
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
	select {
	case <-b.closed:
	case <-e.ctx.Done():
		t.Fatal("the provider built for a server that has stopped was never closed")
	}
}

// While a plugin's Build blocks, the server's xDS updates go on: a
// plaintext version of the Listener replaces the one that waits for its
// provider and is served, and the provider, once built, is closed unused.
func TestBlockedProviderBuildDoesNotHoldUpUpdates(t *testing.T) {
	b := newBlocking()
	e := newEnvWith(t, testutils.ManagementServerOptions{}, func(c *bootstrap.Config) {
		c.CertificateProviders = map[string]bootstrap.CertificateProvider{
			"blocking": {PluginName: blockingPluginName, Config: json.RawMessage(`{}`)},
		}
	})
	t.Cleanup(b.release)
	secure := e.serverListener(nil, serverRoutes())
	downstreamTLS(secure, "blocking", false, false)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{secure}})
	select {
	case <-b.entered:
	case <-e.ctx.Done():
		t.Fatal("the Listener's certificate provider was never built")
	}

	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, serverRoutes())}})
	e.waitMode(xdsserver.ServingModeServing)
	if err := call(e.ctx, e.dial(), sayHello); err != nil {
		t.Errorf("the plaintext version, while the TLS one's provider is being built: %v", err)
	}
	b.release()
	select {
	case <-b.closed:
	case <-e.ctx.Done():
		t.Fatal("the provider of a version replaced while it was built was never closed")
	}
	select {
	case m := <-e.modes:
		t.Errorf("serving mode changed to %v (%v) when the replaced version's provider was built", m.Mode, m.Err)
	default:
	}
}
