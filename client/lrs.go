package client

import (
	"fmt"
	"sync"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/transport"
)

// lrsServer is the load reporting to one server: its store, its stream,
// and how many users hold it.
type lrsServer struct {
	store    *LoadStore
	reporter transport.LoadReporter
	refs     int
}

// lrsState is the client's load reporting, by server key. It has its own
// mutex: reporting load never waits for a response being applied.
type lrsState struct {
	mu      sync.Mutex
	closed  bool                  // guarded by mu
	servers map[string]*lrsServer // by ServerConfig.Key(); guarded by mu
}

// ReportLoad returns the LoadStore whose load goes to server over LRS
// (gRFC A27's load reporting; a cluster with lrs_server: self reports to
// the management server it came from), and starts the LRS stream to that
// server unless it runs already. Each call must be followed by one call of
// release; the stream stops when the last user has released it, after a
// last report (release then waits for it, at most
// transport.FinalReportTimeout). A LoadStore got again after that starts
// from zero.
//
// The stream uses the server's credentials and the client's transport
// options; it fails with an error for a server reached over REST or files,
// and for a TransportBuilder that is no transport.LoadReportingBuilder.
func (c *Client) ReportLoad(server bootstrap.ServerConfig) (store *LoadStore, release func(), err error) {
	key := server.Key()
	c.lrs.mu.Lock()
	defer c.lrs.mu.Unlock()
	if c.lrs.closed {
		return nil, nil, fmt.Errorf("xds client: load reporting: %w", ErrClosed)
	}
	s := c.lrs.servers[key]
	if s == nil {
		st := newLoadStore(c.clock)
		r, err := transport.NewLoadReporter(c.builder, server, c.node, st, c.clock)
		if err != nil {
			return nil, nil, fmt.Errorf("xds client: load reporting: %w", err)
		}
		s = &lrsServer{store: st, reporter: r}
		if c.lrs.servers == nil {
			c.lrs.servers = make(map[string]*lrsServer)
		}
		c.lrs.servers[key] = s
	}
	s.refs++
	var once sync.Once
	return s.store, func() { once.Do(func() { c.releaseLoad(key, s) }) }, nil
}

// releaseLoad drops one user of s, and stops its stream after the last.
func (c *Client) releaseLoad(key string, s *lrsServer) {
	c.lrs.mu.Lock()
	s.refs--
	last := s.refs == 0 && c.lrs.servers[key] == s
	if last {
		delete(c.lrs.servers, key)
	}
	c.lrs.mu.Unlock()
	if last {
		s.reporter.Close() // off the lock: it waits for the stream's goroutines
	}
}

// closeLoadReporting stops every LRS stream, for Close.
func (c *Client) closeLoadReporting() {
	c.lrs.mu.Lock()
	c.lrs.closed = true
	servers := c.lrs.servers
	c.lrs.servers = nil
	c.lrs.mu.Unlock()
	for _, s := range servers {
		s.reporter.Close()
	}
}
