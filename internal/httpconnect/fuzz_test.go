package httpconnect

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The tunnels' goroutines end with each dial; none may be left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// FuzzParseAddr: any string parses or not, without panicking; what parses
// is exactly what Addr makes of its parts, and the parts hold no '/'
// before the target (a proxy is "ip:port").
func FuzzParseAddr(f *testing.F) {
	f.Add(Addr("10.0.0.1:3128", "10.0.0.2:80"))
	f.Add(Addr("[::1]:3128", "[fe80::1]:443"))
	f.Add(scheme + "/x")
	f.Add("10.0.0.2:80")
	f.Fuzz(func(t *testing.T, addr string) {
		proxy, target, ok := ParseAddr(addr)
		if !ok {
			if proxy != "" || target != "" {
				t.Fatalf("ParseAddr(%q) = %q, %q, false: want empty parts", addr, proxy, target)
			}
			return
		}
		if !IsAddr(addr) || Addr(proxy, target) != addr || strings.Contains(proxy, "/") || proxy == "" || target == "" {
			t.Fatalf("ParseAddr(%q) = %q, %q, true: does not make the address again", addr, proxy, target)
		}
	})
}

// FuzzTunnel: whatever a proxy answers to CONNECT, Tunnel returns a
// tunnel or an error, never panics, and a tunnel delivers every byte the
// proxy sent after a 200 answer's header, the ones read with it included.
func FuzzTunnel(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 Connection established\r\n\r\nhello"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"))
	f.Add([]byte("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"))
	f.Add([]byte("HTTP/1.0 200\r\n"))
	f.Add([]byte("SSH-2.0-OpenSSH\r\n"))
	f.Fuzz(func(t *testing.T, answer []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		near, far := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer far.Close()
			// Read the request concurrently: net.Pipe has no buffer.
			go io.Copy(io.Discard, far)
			far.Write(answer)
		}()
		conn, err := Tunnel(ctx, near, "10.0.0.2:80", "")
		if err != nil {
			near.Close()
			<-done
			return
		}
		defer conn.Close()
		rest, _ := io.ReadAll(conn) // ends when the proxy side closes
		<-done
		// What follows the answer's header is the tunnel's: a suffix of
		// what the proxy sent, after a status line.
		if !strings.HasPrefix(string(answer), "HTTP/") || len(rest) >= len(answer) || !strings.HasSuffix(string(answer), string(rest)) {
			t.Fatalf("tunnel delivered %q after answer %q: want what follows its header", rest, answer)
		}
		if tail, ok := strings.CutPrefix(string(answer), "HTTP/1.1 200 Connection established\r\n\r\n"); ok && string(rest) != tail {
			t.Fatalf("tunnel delivered %q after answer %q, want %q", rest, answer, tail)
		}
	})
}
