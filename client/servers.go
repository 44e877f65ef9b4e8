package client

import (
	"sort"
	"time"
)

// AuthorityStatus is one authority the client uses and the health of its
// servers, for status pages (see Client.Authorities).
type AuthorityStatus struct {
	// Name is the authority's name as in xdstp:// names; "" for the
	// top-level servers, which serve every other name.
	Name string
	// Servers are the authority's xds_servers, in priority order.
	Servers []ServerStatus
	// Current is the index in Servers of the server the authority uses
	// now; above 0, a fallback server is in use (gRFC A71).
	Current int
}

// ServerStatus is what the client knows of one management server's
// reachability.
type ServerStatus struct {
	// ServerURI is the server's server_uri in the bootstrap.
	ServerURI string
	// InUse tells whether the client has a transport to the server: the
	// authority's current server, or one of higher priority it keeps
	// reconnecting to so as to go back to it. False for the servers after
	// the current one, and for one skipped when falling back; the fields
	// below are then zero.
	InUse bool
	// Connected tells whether the server has answered and no stream of it
	// has failed without an answer since (gRFC A57: a stream that ends
	// after answering is routine, and the server stays connected while the
	// transport reconnects).
	Connected bool
	// Since is when Connected last changed: when the server answered first
	// or again after an outage, or when the outage began. For a server
	// that has neither answered nor failed yet, when the client began to
	// use it.
	Since time.Time
	// Err is why the server is unreachable, the error of its latest failed
	// stream, while it is (not Connected, and a stream has failed); nil
	// otherwise.
	Err error
	// LastErr is the error of the last stream of the server that ended
	// with one, routine or not, and LastErrAt when it ended. It stays once
	// the server is up again.
	LastErr   error
	LastErrAt time.Time
	// ControlPlane is the identifier the server last gave in a response
	// (control_plane), "" if none.
	ControlPlane string
}

// Authorities reports every authority the client has used (an authority is
// used from the first watch of a name it serves) with the health of its
// servers: the top-level servers first (Name ""), then the others by
// name. A server several authorities list appears in each.
func (c *Client) Authorities() []AuthorityStatus {
	c.mu.Lock()
	defer c.unlock()
	var out []AuthorityStatus
	c.eachAuthorityLocked(func(a *authority) {
		st := AuthorityStatus{Name: a.name, Current: a.active, Servers: make([]ServerStatus, len(a.configs))}
		for i, cfg := range a.configs {
			ss := ServerStatus{ServerURI: cfg.ServerURI}
			if i < len(a.servers) && a.servers[i] != nil {
				s := a.servers[i]
				ss.InUse, ss.Connected, ss.Since = true, s.connected, s.since
				ss.Err, ss.LastErr, ss.LastErrAt = s.unreachable, s.lastErr, s.lastErrAt
				ss.ControlPlane = s.controlPlane
			}
			st.Servers[i] = ss
		}
		out = append(out, st)
	})
	// eachAuthorityLocked gives the top-level first; "" sorts first too.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
