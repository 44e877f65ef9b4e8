// Command httpmesh shows plain HTTP services in a mesh configured by one
// xDS management server (go-control-plane's, from goxds/testutils), both
// ends through goxds: three backends served by httpxds.NewServer (v1 and
// v2 of one service, and "bad", an instance that answers every request
// 503) and a frontend whose http.Client sends through
// httpxds.NewTransport. It prints, scene by scene:
//
//  1. a weighted split: 90/10 between v1 and v2, counted over 200
//     requests;
//  2. a retry that saves failing requests: a cluster of bad and v1,
//     without a retry_policy and with retry_on 5xx;
//  3. a fault abort: the listener's fault filter aborts with 503 the
//     requests that carry x-envoy-fault-abort-request, before any backend
//     sees them;
//  4. outlier ejection: bad fails every request, failure_percentage
//     ejects it, and the requests then reach only v1;
//  5. RBAC on a server: the backends allow only the frontend (the
//     x-caller header its routes add); another caller gets 403.
//  6. mTLS: the frontend reaches a fourth backend, "secure", over mutual
//     TLS (certificates the demo makes, read by the bootstrap's
//     file_watcher providers); then the frontend's certificate files are
//     rewritten, and new connections present the new certificate.
//
// Run it with
//
//	go run ./example/httpmesh
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
		fmt.Fprintln(os.Stderr, "httpmesh:", err)
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
