package testutils

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// The proxy tunnels a CONNECT to the address it names, bytes both ways,
// counts and records the tunnel; refusing, it answers 403 and opens none.
func TestConnectProxy(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	echoed := make(chan struct{})
	go func() {
		defer close(echoed)
		c, err := echo.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	p, err := StartConnectProxy()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()

	connect := func(target string) (*http.Response, net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(testTimeout))
		if _, err := io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		return resp, c, br
	}

	resp, c, br := connect(echo.Addr().String())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT answered %q, want 200", resp.Status)
	}
	io.WriteString(c, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("tunnel echoed %q, %v; want ping", buf, err)
	}
	c.Close()
	<-echoed
	if p.Tunnels() != 1 || len(p.Targets()) != 1 || p.Targets()[0] != echo.Addr().String() {
		t.Fatalf("%d tunnels to %q, want one to %s", p.Tunnels(), p.Targets(), echo.Addr())
	}

	p.SetRefuse(true)
	resp, c, _ = connect(echo.Addr().String())
	c.Close()
	if resp.StatusCode != http.StatusForbidden || p.Refused() != 1 || p.Tunnels() != 1 {
		t.Fatalf("refusing: answered %q, %d refused, %d tunnels; want 403, 1, 1", resp.Status, p.Refused(), p.Tunnels())
	}
}
