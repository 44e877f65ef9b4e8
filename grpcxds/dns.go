package grpcxds

import (
	"errors"
	"net/url"

	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/goxds/xds/dataplane/cluster"
)

// dnsWatch resolves the host:port of a cluster.Resolution (LOGICAL_DNS
// clusters) with gRPC's own "dns" resolver, the one channels use for
// "dns:///" targets: the same lookups, re-resolution pacing and backoff.
// It is that resolver's resolver.ClientConn, and reports to the Set.
type dnsWatch struct {
	// ClientConn is embedded, nil, as gRPC asks of implementations it does
	// not make itself: a method gRPC adds to the interface then reaches
	// it (and panics, as a nil interface does) instead of breaking the
	// build of every program that imports goxds.
	resolver.ClientConn

	b   *xdsBalancer
	res *cluster.Resolution
}

// dnsResolver is a gRPC resolver as the Set's Resolver.
type dnsResolver struct{ r resolver.Resolver }

func (r dnsResolver) ResolveNow() { r.r.ResolveNow(resolver.ResolveNowOptions{}) }
func (r dnsResolver) Close()      { r.r.Close() }

// StartDNS implements cluster.Host: it builds the resolver of res. It is
// called without mu: the resolver may report an IP address from inside
// Build.
func (b *xdsBalancer) StartDNS(res *cluster.Resolution) {
	w := &dnsWatch{b: b, res: res}
	var (
		r   resolver.Resolver
		err = errors.New(`no "dns" resolver is registered with gRPC`)
	)
	if builder := resolver.Get("dns"); builder != nil {
		target := resolver.Target{URL: url.URL{Scheme: "dns", Path: "/" + res.Target()}}
		r, err = builder.Build(target, w, resolver.BuildOptions{DisableServiceConfig: true})
	}
	b.mu.Lock()
	if err != nil {
		if !b.closed {
			b.set.Resolved(res, nil, err)
		}
		b.finishAndUnlock()
		return
	}
	if b.closed || !b.set.Attach(res, dnsResolver{r}) {
		b.mu.Unlock()
		r.Close()
		return
	}
	b.mu.Unlock()
}

// UpdateState implements resolver.ClientConn: a new resolution.
func (w *dnsWatch) UpdateState(s resolver.State) error {
	var addrs []string
	for _, ep := range s.Endpoints {
		for _, a := range ep.Addresses {
			addrs = append(addrs, a.Addr)
		}
	}
	if len(s.Endpoints) == 0 {
		for _, a := range s.Addresses {
			addrs = append(addrs, a.Addr)
		}
	}
	var err error
	if len(addrs) == 0 {
		err = errors.New("resolved to no addresses")
	}
	b := w.b
	b.mu.Lock()
	if w.res.Stopped() || b.closed {
		b.mu.Unlock()
		return nil
	}
	b.set.Resolved(w.res, addrs, err)
	b.finishAndUnlock()
	return err
}

// ReportError implements resolver.ClientConn: a failed resolution.
func (w *dnsWatch) ReportError(err error) {
	b := w.b
	b.mu.Lock()
	if w.res.Stopped() || b.closed {
		b.mu.Unlock()
		return
	}
	b.set.Resolved(w.res, nil, err)
	b.finishAndUnlock()
}

// NewAddress implements resolver.ClientConn.
func (w *dnsWatch) NewAddress(addrs []resolver.Address) {
	_ = w.UpdateState(resolver.State{Addresses: addrs})
}

// ParseServiceConfig implements resolver.ClientConn. Service configs from
// DNS are not asked for, and not used.
func (w *dnsWatch) ParseServiceConfig(string) *serviceconfig.ParseResult {
	return &serviceconfig.ParseResult{Err: errors.New("goxds: service configs from DNS are not used")}
}
