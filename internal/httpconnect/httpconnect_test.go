package httpconnect

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseAddr(t *testing.T) {
	for _, tc := range []struct {
		addr, proxy, target string
		ok                  bool
	}{
		{addr: Addr("10.0.0.1:3128", "10.0.0.2:80"), proxy: "10.0.0.1:3128", target: "10.0.0.2:80", ok: true},
		{addr: Addr("[::1]:3128", "[fe80::1]:443"), proxy: "[::1]:3128", target: "[fe80::1]:443", ok: true},
		{addr: "10.0.0.2:80"},
		{addr: scheme + "10.0.0.1:3128"},
		{addr: scheme + "/10.0.0.2:80"},
	} {
		proxy, target, ok := ParseAddr(tc.addr)
		if proxy != tc.proxy || target != tc.target || ok != tc.ok {
			t.Errorf("ParseAddr(%q) = %q, %q, %v; want %q, %q, %v", tc.addr, proxy, target, ok, tc.proxy, tc.target, tc.ok)
		}
	}
}

// pipeDialer returns a base dialer whose connections are net.Pipes, the
// far end of each handed to proxy (run in its own goroutine, waited for
// by the test's cleanup), and the addresses it was asked for.
func pipeDialer(t *testing.T, proxy func(net.Conn)) (func(context.Context, string) (net.Conn, error), *[]string) {
	var dialed []string
	done := make(chan struct{}, 16)
	n := 0
	t.Cleanup(func() {
		for range n {
			<-done
		}
	})
	return func(_ context.Context, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		near, far := net.Pipe()
		n++
		go func() {
			defer func() { done <- struct{}{} }()
			defer far.Close()
			proxy(far)
		}()
		return near, nil
	}, &dialed
}

// readConnect reads the CONNECT request from c and returns its target.
func readConnect(c net.Conn) (*bufio.Reader, string, error) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, "", err
	}
	if req.Method != http.MethodConnect || req.RequestURI != req.Host {
		return nil, "", errors.New("not a CONNECT to an authority: " + req.Method + " " + req.RequestURI)
	}
	return br, req.Host, nil
}

func TestDialer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("tunnel keeps bytes sent with the answer", func(t *testing.T) {
		targets := make(chan string, 1)
		base, dialed := pipeDialer(t, func(c net.Conn) {
			_, target, err := readConnect(c)
			if err != nil {
				targets <- err.Error()
				return
			}
			targets <- target
			io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\nhello") // one write: answer and tunnel bytes
			io.Copy(io.Discard, c)
		})
		conn, err := Dialer(base)(ctx, Addr("10.0.0.1:3128", "10.0.0.2:80"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if got := <-targets; got != "10.0.0.2:80" {
			t.Fatalf("proxy asked for %q, want 10.0.0.2:80", got)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "hello" {
			t.Fatalf("read %q, %v; want the tunnel's first bytes \"hello\"", buf, err)
		}
		if len(*dialed) != 1 || (*dialed)[0] != "10.0.0.1:3128" {
			t.Fatalf("dialed %q, want the proxy only", *dialed)
		}
	})

	t.Run("refusal names the proxy, target and status", func(t *testing.T) {
		base, _ := pipeDialer(t, func(c net.Conn) {
			readConnect(c)
			io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
		})
		_, err := Dialer(base)(ctx, Addr("10.0.0.1:3128", "10.0.0.2:80"))
		if err == nil || !strings.Contains(err.Error(), `proxy 10.0.0.1:3128, tunnel to 10.0.0.2:80: proxy answered "407 Proxy Authentication Required"`) {
			t.Fatalf("error %v, want one naming the proxy, the target and the 407", err)
		}
	})

	t.Run("cancelled while the proxy is silent", func(t *testing.T) {
		base, _ := pipeDialer(t, func(c net.Conn) {
			readConnect(c)
			io.Copy(io.Discard, c) // never answers; returns when the dialer closes
		})
		cctx, ccancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := Dialer(base)(cctx, Addr("10.0.0.1:3128", "10.0.0.2:80"))
			errc <- err
		}()
		ccancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
	})

	t.Run("other addresses go to base", func(t *testing.T) {
		base, dialed := pipeDialer(t, func(net.Conn) {})
		conn, err := Dialer(base)(ctx, "10.0.0.2:80")
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
		if len(*dialed) != 1 || (*dialed)[0] != "10.0.0.2:80" {
			t.Fatalf("dialed %q, want 10.0.0.2:80", *dialed)
		}
		if _, err := Dialer(base)(ctx, scheme+"10.0.0.1:3128"); err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Fatalf("error %v, want a malformed address", err)
		}
	})
}

// The default dialer keeps grpc-go's proxying from the environment, which
// any custom dialer turns off: an address the environment sends to a proxy
// goes through a CONNECT tunnel of that proxy, with its credentials.
func TestEnvDialer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type seen struct{ target, auth string }
	got := make(chan seen, 1)
	base, dialed := pipeDialer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			got <- seen{target: err.Error()}
			return
		}
		got <- seen{req.Host, req.Header.Get("Proxy-Authorization")}
		io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
		io.Copy(io.Discard, br)
	})
	proxyFor := func(req *http.Request) (*url.URL, error) {
		if req.URL.Host == "10.0.0.2:80" {
			return url.Parse("http://alice:secret@10.0.0.9:3128")
		}
		return nil, nil
	}
	dial := Dialer(EnvDialer(proxyFor, base))
	conn, err := dial(ctx, "10.0.0.2:80")
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if s := <-got; s.target != "10.0.0.2:80" || s.auth != "Basic YWxpY2U6c2VjcmV0" {
		t.Fatalf("proxy saw CONNECT %q with Proxy-Authorization %q; want 10.0.0.2:80, Basic alice:secret", s.target, s.auth)
	}
	conn, err = dial(ctx, "10.0.0.3:80")
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if want := []string{"10.0.0.9:3128", "10.0.0.3:80"}; strings.Join(*dialed, " ") != strings.Join(want, " ") {
		t.Fatalf("dialed %q, want %q", *dialed, want)
	}
}
