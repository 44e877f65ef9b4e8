package httpxds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// newHTTPServer is the http.Server of one generation: the caller's
// template, g as the handler, each connection (and its filter chain) in
// its requests' context, its closing counted by g's freshConns.
func (s *Server) newHTTPServer(g *generation) *http.Server {
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second}
	if t := s.opts.HTTPServer; t != nil {
		srv = &http.Server{
			ReadTimeout: t.ReadTimeout, ReadHeaderTimeout: t.ReadHeaderTimeout, WriteTimeout: t.WriteTimeout,
			IdleTimeout: t.IdleTimeout, MaxHeaderBytes: t.MaxHeaderBytes, ErrorLog: t.ErrorLog,
			Protocols: t.Protocols, HTTP2: t.HTTP2, DisableGeneralOptionsHandler: t.DisableGeneralOptionsHandler,
		}
	}
	if srv.Protocols == nil {
		p := new(http.Protocols)
		p.SetHTTP1(true)
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
		srv.Protocols = p
	}
	if srv.ErrorLog == nil {
		srv.ErrorLog = log.New(discard{}, "", 0)
	}
	srv.Handler = g
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, chainKey{}, chainOf(c))
	}
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed || st == http.StateHijacked {
			if cc := chainOf(c); cc != nil {
				cc.served() // closed before any request: not waited for
			}
		}
	}
	return srv
}

// discard drops net/http's own log lines (handshake errors of clients);
// an HTTPServer template with an ErrorLog gets them.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

type chainKey struct{}

// chainConn is an accepted connection and the filter chain it matched.
type chainConn struct {
	net.Conn
	cs *chainState
	// fresh counts it until its first request reaches the handler (or it
	// closes); nil: not counted.
	fresh *freshConns
	seen  atomic.Bool
	// leaf is the certificate its TLS handshake served (nil: not TLS).
	leaf atomic.Pointer[x509.Certificate]
}

// servedCert is the certificate the server sent on r's connection, gRFC
// A92's destination principal; nil without TLS.
func servedCert(r *http.Request) *x509.Certificate {
	if cc, _ := r.Context().Value(chainKey{}).(*chainConn); cc != nil {
		return cc.leaf.Load()
	}
	return nil
}

// served records that the connection's first request has reached the
// handler, or that it closed before any.
func (cc *chainConn) served() {
	if cc.fresh != nil && !cc.seen.Load() && cc.seen.CompareAndSwap(false, true) {
		cc.fresh.done()
	}
}

func chainOf(c net.Conn) *chainConn {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	cc, _ := c.(*chainConn)
	return cc
}

// freshWait bounds how long a drain waits for a connection's first
// request: net/http's own Shutdown takes a connection that has sent
// nothing for 5 s as idle.
const freshWait = 5 * time.Second

// freshConns counts the connections handed to a generation's server whose
// first request has not reached the handler yet. net/http's Shutdown
// closes such a connection unanswered when its request comes (a server
// shutting down reads no new request), though the client has just
// connected and has nothing to go on; so a drain waits for them before it
// shuts the server down (Envoy answers them, with Connection: close).
type freshConns struct {
	n       atomic.Int64
	changed chan struct{} // a value after n drops, for wait
}

func newFreshConns() *freshConns { return &freshConns{changed: make(chan struct{}, 1)} }

func (f *freshConns) add() { f.n.Add(1) }

func (f *freshConns) done() {
	f.n.Add(-1)
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// wait returns once no connection is fresh, after freshWait, or when
// stop is closed.
func (f *freshConns) wait(stop <-chan struct{}) {
	t := time.NewTimer(freshWait)
	defer t.Stop()
	for f.n.Load() > 0 {
		select {
		case <-f.changed:
		case <-t.C:
			return
		case <-stop:
			return
		}
	}
}
