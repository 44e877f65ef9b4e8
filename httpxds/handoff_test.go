package httpxds

import (
	"net"
	"testing"

	"github.com/goxds/xds/internal/serverconn"
	"github.com/goxds/xds/resources"
)

// A Listener version replaced between handle's look at the generation in
// force and its handing over of a new connection no longer accepts: the
// connection goes to the version in force then, where it used to be
// closed before its first request (the client saw EOF, and a fresh
// connection's request is not retried).
func TestHandoffToReplacedGeneration(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	dialed, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer dialed.Close()
	conn, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	fc := &resources.FilterChain{Name: "only"}
	gen := func() *generation {
		return &generation{
			cfg:    &resources.ServerListener{DefaultFilterChain: fc},
			lis:    serverconn.NewChanListener(lis.Addr()),
			chains: map[*resources.FilterChain]*chainState{fc: {fc: fc}},
		}
	}
	old, cur := gen(), gen()
	l := &listener{cur: old}
	l.testHookHandoff = func(g *generation) {
		if g != old {
			return
		}
		// The new version takes over and the old one's server stops
		// accepting, as listener.after does.
		l.mu.Lock()
		l.cur = cur
		l.mu.Unlock()
		old.lis.Close()
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := cur.lis.Accept()
		accepted <- c
	}()
	l.handle(conn)
	cur.lis.Close() // handle has returned: the connection was handed over, or never will be
	c := <-accepted
	if c == nil {
		t.Fatal("the connection was closed when the Listener version it was looked up for was replaced; want it served by the version in force")
	}
	if cc, ok := c.(*chainConn); !ok || cc.cs.fc != fc {
		t.Errorf("handed over %T, want the connection on the new version's filter chain", c)
	}
}
