package testutils

import "sync"

// AuthzCount is one count an AuthzCounts was told: the channel's target
// and cluster for a client's check, "server" and "" for a server's.
type AuthzCount struct {
	Target, Cluster string
	Outcome         string
}

// AuthzCounts keeps the ext_authz outcomes (gRFC A92) it is told, on
// either side: it implements the ExtAuthzMetrics of grpcxds, httpxds and
// xdsserver, and httpxds's ServerExtAuthzMetrics.
type AuthzCounts struct {
	mu     sync.Mutex
	counts []AuthzCount
}

// ClientExtAuthz counts a client's check.
func (r *AuthzCounts) ClientExtAuthz(target, backendService, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts = append(r.counts, AuthzCount{target, backendService, outcome})
}

// ServerExtAuthz counts a server's check.
func (r *AuthzCounts) ServerExtAuthz(outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts = append(r.counts, AuthzCount{"server", "", outcome})
}

// Take returns the counts so far and forgets them.
func (r *AuthzCounts) Take() []AuthzCount {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.counts
	r.counts = nil
	return out
}
