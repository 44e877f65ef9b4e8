package grpcxds

import (
	"errors"
	"net/url"
	"slices"

	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

// dnsWatch resolves the host:port of LOGICAL_DNS clusters with gRPC's own
// "dns" resolver, the one channels use for "dns:///" targets: the same
// lookups, re-resolution pacing and backoff. It is that resolver's
// resolver.ClientConn. Everything but r's own calls is guarded by
// xdsBalancer.mu.
type dnsWatch struct {
	// ClientConn is embedded, nil, as gRPC asks of implementations it does
	// not make itself: a method gRPC adds to the interface then reaches
	// it (and panics, as a nil interface does) instead of breaking the
	// build of every program that imports goxds.
	resolver.ClientConn

	b      *xdsBalancer
	target string // host:port
	// users are the clusters with a leaf resolving target; none, and the
	// resolver is closed.
	users map[*clusterLB]struct{}
	// started: startDNS was called. r is the resolver once Build returned;
	// stopped: dropped from xdsBalancer.dns, so r is to be closed.
	started, stopped bool
	r                resolver.Resolver
	// addrs are the last addresses resolved; err is the last error, kept
	// beside older addresses, which stay in use.
	addrs []string
	err   error
}

// dnsWatchLocked returns the resolution of target, starting one if it is
// new (the resolver itself starts in finishAndUnlock).
func (b *xdsBalancer) dnsWatchLocked(target string) *dnsWatch {
	w := b.dns[target]
	if w == nil {
		w = &dnsWatch{b: b, target: target, users: make(map[*clusterLB]struct{})}
		b.dns[target] = w
	}
	return w
}

// dnsChangesLocked returns the resolutions to start, and the resolvers to
// close because no cluster uses them any more.
func (b *xdsBalancer) dnsChangesLocked() (start []*dnsWatch, stop []resolver.Resolver) {
	for target, w := range b.dns {
		switch {
		case len(w.users) == 0:
			delete(b.dns, target)
			w.stopped = true
			if w.r != nil {
				stop = append(stop, w.r)
			}
		case !w.started:
			w.started = true
			start = append(start, w)
		}
	}
	return start, stop
}

// startDNS builds w's resolver. It is called without mu: the resolver may
// report an IP address from inside Build.
func (b *xdsBalancer) startDNS(w *dnsWatch) {
	var (
		r   resolver.Resolver
		err = errors.New(`no "dns" resolver is registered with gRPC`)
	)
	if builder := resolver.Get("dns"); builder != nil {
		target := resolver.Target{URL: url.URL{Scheme: "dns", Path: "/" + w.target}}
		r, err = builder.Build(target, w, resolver.BuildOptions{DisableServiceConfig: true})
	}
	b.mu.Lock()
	if err != nil {
		if !w.stopped && !b.closed {
			w.setLocked(nil, err)
		}
		b.finishAndUnlock()
		return
	}
	if w.stopped || b.closed {
		b.mu.Unlock()
		r.Close()
		return
	}
	w.r = r
	b.mu.Unlock()
}

// setLocked records a resolution (addrs) or a failure (err) and rebuilds
// the clusters using it if what they see changed.
func (w *dnsWatch) setLocked(addrs []string, err error) {
	if err != nil {
		w.err = err
		if len(w.addrs) > 0 {
			return // the last addresses stay in use
		}
	} else {
		if w.err == nil && slices.Equal(addrs, w.addrs) {
			return
		}
		w.addrs, w.err = addrs, nil
	}
	for cl := range w.users {
		w.b.refreshClusterLocked(cl, true)
	}
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
	if w.stopped || b.closed {
		b.mu.Unlock()
		return nil
	}
	w.setLocked(addrs, err)
	b.finishAndUnlock()
	return err
}

// ReportError implements resolver.ClientConn: a failed resolution.
func (w *dnsWatch) ReportError(err error) {
	b := w.b
	b.mu.Lock()
	if w.stopped || b.closed {
		b.mu.Unlock()
		return
	}
	w.setLocked(nil, err)
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
