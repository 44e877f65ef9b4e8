package serverconn

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// A Listener version replaced between Handoff's look at the version in
// force and its handing over no longer accepts: the connection goes to the
// version in force then, where it used to be closed before its first
// request (httpxds's clients saw EOF, and a fresh connection's request is
// not retried; xdsserver's backed off). A version that does not take it
// and is still in force, or none in force, closes it.
// testTimeout bounds a wait for an event that comes at once unless the
// code is wrong.
const testTimeout = 10 * time.Second

func TestHandoff(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	pair := func() (server, client net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := lis.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); s.Close() })
		return s, c
	}
	// closed reports whether the server side of client's connection was
	// closed: it writes nothing, so a read ends in EOF then, and in the
	// deadline otherwise.
	closed := func(client net.Conn) bool {
		client.SetReadDeadline(time.Now().Add(testTimeout))
		var b [1]byte
		_, err := client.Read(b[:])
		return errors.Is(err, io.EOF)
	}

	// old is in force when looked at, and stops accepting (a new version
	// took over) before the handing over.
	old, cur := NewChanListener(lis.Addr()), NewChanListener(lis.Addr())
	inForce := old
	conn, _ := pair()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := cur.Accept()
		accepted <- c
	}()
	Handoff(conn, func() *ChanListener { return inForce }, func(l *ChanListener) bool {
		if l == old {
			inForce = cur
			old.Close()
		}
		return l.Deliver(conn)
	})
	cur.Close() // Handoff has returned: conn was handed over, or never will be
	if c := <-accepted; c != conn {
		t.Fatalf("the version in force accepted %v; want the connection the replaced version no longer took", c)
	}

	// A version in force that does not take it (no filter chain matched).
	server, client := pair()
	looks := 0
	Handoff(server, func() *ChanListener { looks++; return cur }, func(*ChanListener) bool { return false })
	if c := closed(client); !c || looks != 2 {
		t.Errorf("a connection no version takes: closed %v after %d looks; want closed after 2", c, looks)
	}

	// Not serving.
	server, client = pair()
	Handoff(server, func() *ChanListener { return nil }, func(*ChanListener) bool {
		t.Error("handed to a version while none is in force")
		return true
	})
	if !closed(client) {
		t.Error("a connection while not serving is left open")
	}
}
