package cluster

import "slices"

// Resolution is the resolution of the host:port of LOGICAL_DNS leaves,
// shared by every cluster whose leaves name it. The Set keeps what it
// resolved to and which clusters use it; the resolver is the transport's
// (grpcxds: gRPC's own "dns" resolver, with its lookups, re-resolution
// pacing and backoff), started by Host.StartDNS once the owner's lock is
// released (a resolver may report from inside its start), and reporting
// with Set.Resolved under that lock. Guarded by the owner's lock.
type Resolution struct {
	target string // host:port
	// users are the clusters with a leaf resolving target; none, and the
	// resolver is closed.
	users map[*Cluster]struct{}
	// started: StartDNS was asked for. r is the resolver once attached;
	// stopped: dropped from Set.dns, so r is to be closed.
	started, stopped bool
	r                Resolver
	// addrs are the last addresses resolved; err is the last error, kept
	// beside older addresses, which stay in use.
	addrs []string
	err   error
}

// Resolver is the transport's resolver of a Resolution.
type Resolver interface {
	// ResolveNow asks for a new resolution, if the resolver is not at it.
	ResolveNow()
	// Close stops the resolver; it reports no more.
	Close()
}

// Target is the host:port resolved.
func (r *Resolution) Target() string { return r.target }

// Stopped reports whether no cluster uses the resolution any more: its
// resolver is to be closed, and what it reports is ignored.
func (r *Resolution) Stopped() bool { return r.stopped }

// ResolveNow asks the resolver, if started, to resolve again: an endpoint
// of the name failed. Under the owner's lock.
func (r *Resolution) ResolveNow() {
	if r.r != nil {
		r.r.ResolveNow()
	}
}

// resolutionLocked returns the resolution of target, making one if it is
// new (its resolver starts after Finish).
func (s *Set) resolutionLocked(target string) *Resolution {
	w := s.dns[target]
	if w == nil {
		w = &Resolution{target: target, users: make(map[*Cluster]struct{})}
		s.dns[target] = w
	}
	return w
}

// dnsChangesLocked returns the resolutions to start, and the resolvers to
// close because no cluster uses them any more.
func (s *Set) dnsChangesLocked() (start []*Resolution, stop []Resolver) {
	for target, w := range s.dns {
		switch {
		case len(w.users) == 0:
			delete(s.dns, target)
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

// Attach gives res, whose start Host.StartDNS made, its resolver. It
// reports false if res was stopped meanwhile, or the Set closed: the
// caller closes r (with no lock held). Under the owner's lock.
func (s *Set) Attach(res *Resolution, r Resolver) bool {
	if res.stopped || s.closed {
		return false
	}
	res.r = r
	return true
}

// Resolved records a resolution of res: its addresses, or why it failed
// (err), and rebuilds the clusters using it if what they see changed. A
// failure keeps the last addresses in use. Ignored once res is stopped.
// Under the owner's lock.
func (s *Set) Resolved(res *Resolution, addrs []string, err error) {
	if res.stopped || s.closed {
		return
	}
	if err != nil {
		res.err = err
		if len(res.addrs) > 0 {
			return // the last addresses stay in use
		}
	} else {
		if res.err == nil && slices.Equal(addrs, res.addrs) {
			return
		}
		res.addrs, res.err = addrs, nil
	}
	for cl := range res.users {
		s.refreshClusterLocked(cl, true)
	}
}
