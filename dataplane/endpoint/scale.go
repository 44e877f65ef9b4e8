package endpoint

// Connection scaling (gRFC A105): a cluster may allow a transport several
// connections to each of its endpoints (max_connections_per_subchannel,
// from its per-host circuit breaker), made as the server's
// MAX_CONCURRENT_STREAMS run out. An endpoint listed by several clusters
// takes the largest of their settings, as the gRFC's shared subchannels
// do. The pool keeps each user's setting and tells the transport the
// endpoint's (Scaler); making and choosing the connections is the
// transport's.

// Scaler is a Dialer that scales connections: the pool tells it when an
// endpoint's MaxConns changes, under the owner's lock.
type Scaler interface {
	MaxConnsChanged(ep *Endpoint)
}

// scaling is the setting of each user of an endpoint that set one above 1,
// and the largest. Kept apart from Endpoint, nil for the endpoints no
// user scales (nearly all), so that they pay one pointer for it.
type scaling struct {
	by  map[User]uint32
	max uint32
}

// MaxConns is the most connections the endpoint's users allow it: the
// largest of their settings, 1 when none set one.
func (e *Endpoint) MaxConns() uint32 {
	if e.scale == nil {
		return 1
	}
	return e.scale.max
}

// SetMaxConns records u's setting for ep's connections (n; 0 or 1: u does
// not scale them), and tells the dialer if ep's MaxConns changed.
func (p *Pool) SetMaxConns(ep *Endpoint, u User, n uint32) {
	if n <= 1 && (ep.scale == nil || ep.scale.by[u] == 0) {
		return
	}
	before := ep.MaxConns()
	if n > 1 {
		if ep.scale == nil {
			ep.scale = &scaling{by: make(map[User]uint32)}
		}
		ep.scale.by[u] = n
	} else {
		delete(ep.scale.by, u)
	}
	ep.scale.max = 1
	for _, v := range ep.scale.by {
		ep.scale.max = max(ep.scale.max, v)
	}
	if len(ep.scale.by) == 0 {
		ep.scale = nil
	}
	if ep.MaxConns() != before {
		if s, ok := p.dialer.(Scaler); ok {
			s.MaxConnsChanged(ep)
		}
	}
}
