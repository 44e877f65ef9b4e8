package extauthzgrpc

import (
	"context"
	"errors"
	"sync"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// Channels keeps the channels to side services (authorization, gRFC A92;
// processing, A93) of one owner (a gRPC channel's resolver, an
// xDS-enabled server, an HTTP client or server), one per target and
// credentials, so that a configuration update that keeps them keeps the
// channel (gRFC A92). A channel is made at the first call that needs it.
// Once the owner says what its configuration names (Name), a channel it
// no longer names is closed as soon as no call on it is in flight, so
// that a check or processing stream begun under the old configuration
// finishes, and channels do not pile up on an owner whose side services
// change. Close closes them all. The zero value is ready to use.
//
// A check or processing stream is a call on one of these channels with the
// data-plane RPC's context as its parent (its values, not always its
// cancellation), so that a stats handler of DialOptions (an OpenTelemetry
// one, say) sees the RPC's trace and makes the side call its child span
// (gRFC A92, A93).
type Channels struct {
	// DialOptions are given to every channel before its credentials,
	// which they cannot replace: the owner's users' stats handlers,
	// interceptors, keepalives. Set before the first Client or Conn.
	DialOptions []grpc.DialOption

	mu sync.Mutex
	m  map[string]*service
	// scopes are the channel keys each part of the owner's configuration
	// names (Name); nil until the first Name, when every channel is kept.
	scopes map[any]map[string]bool
	closed bool
}

// service is one channel and its credentials.
type service struct {
	key   string
	conn  *grpc.ClientConn
	creds *bootstrap.ChannelCredentials // closed after conn; nil if none
	// release frees what TlsCredentials hold (their certificate
	// providers), after conn; nil if nothing.
	release func()
	// calls are the calls in flight on conn: unary checks until they
	// return, processing streams until they end.
	calls int
	// retired: the owner's configuration no longer names the service, so
	// the channel closes when calls drops to zero.
	retired bool
}

// close closes the channel, then what its credentials hold.
func (s *service) close() {
	s.conn.Close()
	s.creds.Close()
	if s.release != nil {
		s.release()
	}
}

// errClosed is the failure of a check after Close.
var errClosed = errors.New("extauthzgrpc: closed")

// Client returns the client of gs's service, making its channel if none
// is open.
func (c *Channels) Client(gs *resources.GrpcService) (extauthz.Client, error) {
	conn, md, err := c.Conn(gs)
	if err != nil {
		return nil, err
	}
	return &client{ac: authv3.NewAuthorizationClient(conn), md: md}, nil
}

// Conn returns the channel to gs's service and the metadata every call on
// it carries (a trusted server's initial_metadata): for the other
// side-channel services a filter names (ext_proc's, gRFC A93,
// internal/extprocgrpc), which share the channels of one owner. The
// channel is made now when the owner's configuration names gs (so that
// credentials that cannot be built fail here); each call on the result
// takes the open channel then, counted in flight until it ends. A call
// made for a configuration the owner has since replaced (an RPC that
// chose its route before the update) gets a channel that closes when its
// last call ends, if the one it named is already closed.
func (c *Channels) Conn(gs *resources.GrpcService) (grpc.ClientConnInterface, metadata.MD, error) {
	key := channelKey(gs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, errClosed
	}
	if _, ok := c.m[key]; !ok && c.namedLocked(key) {
		if _, err := c.dialLocked(key, gs); err != nil {
			return nil, nil, err
		}
	}
	return &sideConn{c: c, gs: gs, key: key}, initialMetadata(gs), nil
}

// namedLocked reports whether the owner's configuration names the
// service of key: always before the first Name.
func (c *Channels) namedLocked(key string) bool {
	if c.scopes == nil {
		return true
	}
	for _, keys := range c.scopes {
		if keys[key] {
			return true
		}
	}
	return false
}

// dialLocked makes the channel of key, to gs's service, retired at once
// if no configuration names it.
func (c *Channels) dialLocked(key string, gs *resources.GrpcService) (*service, error) {
	s, err := dial(gs, c.DialOptions)
	if err != nil {
		return nil, err
	}
	s.key, s.retired = key, !c.namedLocked(key)
	if c.m == nil {
		c.m = make(map[string]*service)
	}
	c.m[key] = s
	return s, nil
}

// Name tells which side services the part scope of the owner's
// configuration names (a resolver's one configuration, a server's
// listener: any comparable value; nil services when the part is gone),
// as each update takes effect. Channels no part names close once their
// calls in flight end; a service named again before its channel closed
// keeps it. Until the first Name every channel is kept until Close.
func (c *Channels) Name(scope any, services []*resources.GrpcService) {
	keys := make(map[string]bool, len(services))
	for _, gs := range services {
		if gs != nil {
			keys[channelKey(gs)] = true
		}
	}
	var done []*service
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if c.scopes == nil {
		c.scopes = make(map[any]map[string]bool)
	}
	if len(keys) == 0 {
		delete(c.scopes, scope)
	} else {
		c.scopes[scope] = keys
	}
	for key, s := range c.m {
		s.retired = !c.namedLocked(key)
		if s.retired && s.calls == 0 {
			delete(c.m, key)
			done = append(done, s)
		}
	}
	c.mu.Unlock()
	for _, s := range done {
		s.close()
	}
}

// acquire counts a call on the channel of key in flight, making the
// channel if it is not open (closed since Conn, retired by an update).
func (c *Channels) acquire(key string, gs *resources.GrpcService) (*service, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	s, ok := c.m[key]
	if !ok {
		var err error
		if s, err = c.dialLocked(key, gs); err != nil {
			return nil, err
		}
	}
	s.calls++
	return s, nil
}

// done ends a call acquire counted: the last call on a retired channel
// closes it.
func (c *Channels) done(s *service) {
	c.mu.Lock()
	s.calls--
	last := s.calls == 0 && s.retired && !c.closed && c.m[s.key] == s
	if last {
		delete(c.m, s.key)
	}
	c.mu.Unlock()
	if last {
		s.close()
	}
}

// Close closes every channel; later checks fail.
func (c *Channels) Close() {
	c.mu.Lock()
	m := c.m
	c.m, c.closed = nil, true
	c.mu.Unlock()
	for _, s := range m {
		s.close()
	}
}

// sideConn is the channel of one service as its callers hold it: each
// call takes the open channel of its key and is counted on it while in
// flight, so that a channel the configuration stopped naming closes
// only when its calls are over.
type sideConn struct {
	c   *Channels
	gs  *resources.GrpcService
	key string
}

// Invoke implements grpc.ClientConnInterface.
func (sc *sideConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	s, err := sc.c.acquire(sc.key, sc.gs)
	if err != nil {
		return err
	}
	defer sc.c.done(s)
	return s.conn.Invoke(ctx, method, args, reply, opts...)
}

// NewStream implements grpc.ClientConnInterface: the stream is in flight
// until gRPC finishes it (its status received, its context ended).
func (sc *sideConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := sc.c.acquire(sc.key, sc.gs)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	end := func(error) { once.Do(func() { sc.c.done(s) }) }
	// OnFinish is not called when the stream fails before it exists.
	cs, err := s.conn.NewStream(ctx, desc, method, append(opts[:len(opts):len(opts)], grpc.OnFinish(end))...)
	if err != nil {
		end(err)
		return nil, err
	}
	return cs, nil
}
