// Command mesh shows a two-service mesh in one process, both ends through
// goxds and configured by one xDS management server (go-control-plane's,
// from goxds/testutils): a greeter server built with xdsserver (gRFC A36)
// and a client channel through grpcxds with xdscreds (gRFC A29). The
// management server tells both ends to talk mutual TLS, with certificates
// the demo makes and the file_watcher certificate providers read, and
// tells the server to allow only SayHello from the client's SPIFFE ID
// (RBAC, gRFC A41). It prints, step by step:
//
//  1. the server moves to serving when its Listener arrives;
//  2. SayHello over mTLS: the server names the client's SPIFFE ID;
//  3. SayBye: denied by RBAC (PERMISSION_DENIED);
//  4. a plaintext client: refused (UNAVAILABLE);
//  5. the server's Listener deleted: not serving, the client's RPC fails;
//  6. the Listener back: serving, SayHello works again.
//
// Run it with
//
//	go run ./example/mesh
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// demoTimeout bounds the whole demo: it takes about a second, but a broken
// one must not hang.
const demoTimeout = 30 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mesh:", err)
		os.Exit(1)
	}
}

// run is the whole command but for signals and the exit status, so that
// tests can run it.
func run(ctx context.Context, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	m, err := startMesh(ctx, out)
	if err != nil {
		return err
	}
	defer m.stop()
	return m.play(ctx)
}
