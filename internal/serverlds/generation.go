package serverlds

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/goxds/xds/internal/serverconn"
	"github.com/goxds/xds/internal/servertls"
	"github.com/goxds/xds/resources"
)

// keyMaterialTimeout bounds how long a handshake waits for a certificate
// provider that has not read its files yet.
const keyMaterialTimeout = 10 * time.Second

// Generation is the part of a generation that does not depend on what
// serves it: one Listener version, the net.Listener its server accepts
// from, and the TLS of its filter chains.
type Generation struct {
	// Config is the Listener version served.
	Config *resources.ServerListener
	// Lis is what the generation's server accepts from: the connections
	// Server.Deliver hands it.
	Lis *serverconn.ChanListener

	// tls holds the TLS of each chain that has a DownstreamTlsContext,
	// built on demand; ended when the generation's server has stopped.
	tls map[*resources.FilterChain]*servertls.Chain
	// ctx ends when the generation stops, ending the handshakes that
	// wait for its certificate providers.
	ctx    context.Context
	cancel context.CancelFunc
}

// newGeneration is the common part of cfg's generation. Called with l.mu
// held: it builds nothing that can block (certificate providers are built
// on demand, by servertls.Chain).
func (l *Listener[G]) newGeneration(cfg *resources.ServerListener) *Generation {
	gen := &Generation{Config: cfg, Lis: serverconn.NewChanListener(l.cfg.Raw.Addr()),
		tls: make(map[*resources.FilterChain]*servertls.Chain)}
	gen.ctx, gen.cancel = context.WithCancel(context.Background())
	for _, fc := range servertls.Chains(cfg) {
		if fc.Security != nil {
			gen.tls[fc] = servertls.NewChain(l.cfg.Bootstrap, fc, func(err error) {
				l.cfg.Server.Warn("filter chain refuses its connections", "listener", l.cfg.Name, "filter_chain", fc.Name, "error", err)
			})
		}
	}
	return gen
}

// HasTLS reports whether fc, one of the generation's chains, has a
// DownstreamTlsContext: its connections are then TLS, never plaintext.
func (g *Generation) HasTLS(fc *resources.FilterChain) bool { return g.tls[fc] != nil }

// TLSConfig is the TLS of a handshake on chain fc, offering nextProtos
// by ALPN: its certificate providers' current key material, so that
// rotated files are used from the next handshake on. It is nil (and no
// error) for a chain without a DownstreamTlsContext. It waits for
// providers being built until ctx ends, keyMaterialTimeout passes or the
// generation stops (a plugin that blocks must not hold up a server's
// stop).
func (g *Generation) TLSConfig(ctx context.Context, fc *resources.FilterChain, nextProtos []string) (*tls.Config, error) {
	c := g.tls[fc]
	if c == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, keyMaterialTimeout)
	defer cancel()
	stop := context.AfterFunc(g.ctx, cancel)
	defer stop()
	sec, err := c.Get(ctx)
	if err != nil {
		return nil, err
	}
	return sec.Config(ctx, nextProtos)
}

// end releases what the generation held, once its server has stopped.
func (g *Generation) end() {
	g.cancel()
	for _, c := range g.tls {
		c.End()
	}
}
