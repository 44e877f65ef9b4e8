package cluster

import "strconv"

// Authority rewriting (gRFC A81 for gRPC, Envoy's auto_host_rewrite for
// HTTP) sends a request with the authority of the endpoint picked for it.
// Only the transport learns which endpoint that is, from the endpoint it
// picked, so an endpoint with an authority must stand for that authority
// alone: the transports key it apart (AuthorityKey) from the same
// addresses listed under another hostname or none. Addresses listed under
// one hostname everywhere, the usual case, still share one endpoint.

// Authority is the authority of the endpoint: a LOGICAL_DNS cluster's
// host:port (the DNS target), whatever address it resolved to; else the
// EDS endpoint's hostname; "" for none.
func (s *EndpointSpec) Authority() string {
	if s.DNS != nil {
		return s.DNS.Target()
	}
	return s.Hostname
}

// AuthorityKey is the part of an endpoint's pool key (endpoint.Pool.Get's
// extra) for authority a, before rest, the transport's own part: rest
// alone for no authority. The authority is quoted, so that no hostname
// reads as another key's.
func AuthorityKey(a, rest string) string {
	if a == "" {
		return rest
	}
	return "authority=" + strconv.Quote(a) + "|" + rest
}
