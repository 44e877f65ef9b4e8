package xdsserver

import (
	"net"
	"net/netip"

	"google.golang.org/grpc"

	"github.com/goxds/xds/dataplane/authz"
	"github.com/goxds/xds/internal/serverlds"
)

// listener is one address a GRPCServer serves. The Listener watch, its
// route configurations, the serving modes and the swap of generations are
// internal/serverlds's, shared with httpxds; what is gRPC's is here: a
// generation is one Listener version served by a grpc.Server of its own,
// and the one a new version replaces is stopped with
// grpc.Server.GracefulStop (its connections get a GOAWAY and close when
// their RPCs are done). That is how grpc-go drains connections on a
// Listener change, done with public API only.
type listener struct {
	s    *GRPCServer
	core *serverlds.Listener[*generation]
}

var _ serverlds.Server[*generation] = (*listener)(nil)

func newListener(s *GRPCServer, raw net.Listener, name string) *listener {
	l := &listener{s: s}
	l.core = serverlds.New(serverlds.Config[*generation]{Client: s.xc, Bootstrap: s.opts.bootstrap, Raw: raw, Name: name, Server: l, Reports: s.reports,
		Side: &s.authzChannels})
	return l
}

// generation is one Listener version being served.
type generation struct {
	l   *listener
	gen *serverlds.Generation
	srv *grpc.Server
	// served are the certificates its TLS connections served, for
	// ext_authz's destination principal (creds.go).
	served servedCerts
}

// Start implements serverlds.Server: a grpc.Server serving gen's version.
// Called with the core's lock held: it builds nothing that can block.
func (l *listener) Start(gen *serverlds.Generation) *generation {
	s := l.s
	g := &generation{l: l, gen: gen}
	g.srv = s.newGRPCServer(g)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		g.srv.Serve(gen.Lis) // returns when stopped
		// Serve returns when the listener closes; a graceful stop may
		// still be waiting for RPCs, and GracefulStop's goroutine
		// releases the generation then.
	}()
	return g
}

// Stop implements serverlds.Server: gracefully, its connections get a
// GOAWAY and close when their RPCs end; otherwise at once.
func (l *listener) Stop(g *generation, graceful bool) {
	s := l.s
	if !graceful {
		g.gen.Lis.Close()
		g.srv.Stop()
		l.core.Stopped(g)
		return
	}
	// Counted before Lis closes: until then Serve's goroutine holds the
	// count above zero, so a Stop waiting meanwhile waits for this one too.
	s.wg.Add(1)
	g.gen.Lis.Close()
	go func() {
		defer s.wg.Done()
		g.srv.GracefulStop()
		l.core.Stopped(g)
	}()
}

// Deliver implements serverlds.Server: it hands conn to g's server with
// the filter chain it matches, for xDS server credentials to ask for the
// chain's TLS (creds.go).
func (l *listener) Deliver(g *generation, conn net.Conn, local, remote netip.AddrPort) bool {
	fc := authz.FindFilterChain(g.gen.Config, local, remote)
	if fc == nil {
		return false // no chain for this peer
	}
	return g.gen.Lis.Deliver(&chainConn{Conn: conn, gen: g.gen, fc: fc, served: &g.served, key: connKey{local, remote}})
}

// NotServerListener implements serverlds.Server, in grpc-go's words.
func (l *listener) NotServerListener(name string) error {
	return l.s.configError("received client-side listener resource %q on server-side (it has an api_listener)", name)
}

// WrongAddress implements serverlds.Server, in grpc-go's words.
func (l *listener) WrongAddress(name, addr, listening string) error {
	return l.s.configError("address (%s) in Listener update does not match listening address: (%s): Listener %q", addr, listening, name)
}

// Warn implements serverlds.Server.
func (l *listener) Warn(msg string, args ...any) { l.s.warn(msg, args...) }
