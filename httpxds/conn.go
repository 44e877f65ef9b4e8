package httpxds

import (
	"context"
	"crypto/tls"
	"log"
	"net"
	"net/http"
	"time"
)

// newHTTPServer is the http.Server of one generation: the caller's
// template, g as the handler, each connection's filter chain in its
// requests' context.
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
}

func chainOf(c net.Conn) *chainState {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if cc, ok := c.(*chainConn); ok {
		return cc.cs
	}
	return nil
}
