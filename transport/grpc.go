package transport

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"

	"github.com/goxds/xds/bootstrap"
)

// Options tune the transports a Builder makes. The zero value is ready to
// use.
type Options struct {
	// Backoff paces stream restarts after failures. Zero: grpc's
	// backoff.DefaultConfig (1 s growing by 1.6× to 120 s, ±20% jitter).
	// It resets once a stream has delivered a response. A restart while
	// the gRPC channel is failing makes the channel try the server at once
	// rather than after its own connect backoff, so that a stream is back
	// within this backoff of the server's return; the channel's own
	// reconnection follows this backoff too (see transport/grpc.go).
	Backoff backoff.Config
	// MinStreamInterval is the least time between the starts of two
	// streams, even when the earlier one was healthy. Zero: 1 s.
	MinStreamInterval time.Duration
	// Clock paces the starts of ADS streams (Backoff and
	// MinStreamInterval). Nil: the real clock. Tests pass a fake one
	// (testutils.FakeClock) to see the client wait for a pace by its timer
	// rather than by the wall clock of a loaded machine.
	Clock StreamClock
	// SilenceTimeout restarts a stream on which requests were sent but
	// nothing at all came back within this time. Zero disables it, since a
	// server with nothing to say may legitimately stay silent.
	SilenceTimeout time.Duration
	// NACKBackoff paces the NACKs of a server that keeps resending a
	// response the client rejected (same version, same errors): the n-th
	// repeat is held for the n-th delay of this backoff before the NACK is
	// sent. Only that reply waits: responses of other types are read and
	// answered meanwhile, and a newer response of the type replaces the
	// held NACK with its own reply. Zero: 100 ms doubling to 30 s, ±20%
	// jitter. A changed response, or an ACK, resets it.
	NACKBackoff backoff.Config
	// MaxResponseBytes bounds the size of one response. Zero: 256 MiB,
	// well above gRPC's 4 MiB default, which large deployments exceed.
	MaxResponseBytes int
	// DialOptions are added to the options used to dial the server, after
	// the transport credentials from the bootstrap.
	DialOptions []grpc.DialOption
	// PollFiles makes FILESYSTEM transports look for changes by polling
	// (every RefreshDelay of the server) instead of asking the operating
	// system to report them, for file systems that cannot (NFS, some FUSE
	// mounts). Polling is also what they fall back to when the system
	// refuses to watch a directory.
	PollFiles bool
	// FileQuietPeriod is how long a FILESYSTEM file changed in place (not
	// replaced by a rename) must stay unchanged before it is read, so that
	// a file still being written ("> file", an editor saving in place) is
	// not taken for the new configuration. Zero: DefaultFileQuietPeriod.
	// Negative: read at once. Files replaced by a rename are read at once
	// whatever this says. On Linux a watched file is read when its writer
	// closes it instead, however long it pauses (inotify tells); the quiet
	// period is for files polled, and other systems.
	FileQuietPeriod time.Duration
	// Logger receives the transport's logs. Nil: discard.
	Logger *slog.Logger
}

// DefaultFileQuietPeriod is the default of Options.FileQuietPeriod: far
// longer than the pauses of a program or editor writing a file, short
// enough that a person editing one sees it applied at once.
const DefaultFileQuietPeriod = 250 * time.Millisecond

func (o Options) withDefaults() Options {
	if o.FileQuietPeriod == 0 {
		o.FileQuietPeriod = DefaultFileQuietPeriod
	}
	if o.Backoff == (backoff.Config{}) {
		o.Backoff = backoff.DefaultConfig
	}
	if o.NACKBackoff == (backoff.Config{}) {
		o.NACKBackoff = backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 2, Jitter: 0.2, MaxDelay: 30 * time.Second}
	}
	if o.MinStreamInterval == 0 {
		o.MinStreamInterval = time.Second
	}
	if o.MaxResponseBytes == 0 {
		o.MaxResponseBytes = 256 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Builder makes the transport for one management server.
type Builder interface {
	// Build returns a transport to server that identifies itself with node
	// and reports to h. It does not wait for the server: the stream starts
	// once a name is wanted.
	Build(server bootstrap.ServerConfig, node *corev3.Node, h Handler) (Transport, error)
}

// NewBuilder returns the Builder of every transport goxds has, chosen by the
// server's APIType: gRPC ADS, SotW (StreamAggregatedResources) or delta
// (DeltaAggregatedResources); gRPC streams per type (APITypeGRPC,
// APITypeDeltaGRPC, or per-type overrides in APITypePerType); REST-JSON
// polling (APITypeREST); files (APITypeFilesystem).
func NewBuilder(opts Options) Builder {
	return grpcBuilder{opts: opts.withDefaults()}
}

type grpcBuilder struct{ opts Options }

func (b grpcBuilder) Build(server bootstrap.ServerConfig, node *corev3.Node, h Handler) (Transport, error) {
	switch api := server.APIType; {
	case api == bootstrap.APITypeREST:
		return b.buildREST(server, node, h)
	case api == bootstrap.APITypeFilesystem:
		return b.buildFiles(server, h)
	case len(server.APITypePerType) > 0 || api == bootstrap.APITypeGRPC || api == bootstrap.APITypeDeltaGRPC:
		return b.buildMux(server, node, h)
	case api == bootstrap.APITypeAggregatedGRPC || api == bootstrap.APITypeAggregatedDeltaGRPC:
		return b.buildADS(server, node, h)
	}
	return nil, fmt.Errorf("xDS server %s: api_type %v is not supported by this transport", server.ServerURI, server.APIType)
}

// dial makes the gRPC channel to a server. release closes it, then the
// credentials (which may hold a goroutine that re-reads certificate files).
func (b grpcBuilder) dial(server bootstrap.ServerConfig) (cc grpc.ClientConnInterface, release func(), err error) {
	creds, err := server.ChannelCredentials()
	if err != nil {
		return nil, nil, fmt.Errorf("xDS server %s: %w", server.ServerURI, err)
	}
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds.Transport),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(b.opts.MaxResponseBytes)),
	}
	if p, ok := channelBackoff(b.opts.Backoff); ok {
		dialOpts = append(dialOpts, grpc.WithConnectParams(p))
	}
	if creds.PerRPC != nil {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(creds.PerRPC))
	}
	for _, c := range creds.Call { // call_creds (gRFC A97)
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(c))
	}
	conn, err := grpc.NewClient(server.ServerURI, append(dialOpts, b.opts.DialOptions...)...)
	if err != nil {
		creds.Close()
		return nil, nil, fmt.Errorf("xDS server %s: dial: %w", server.ServerURI, err)
	}
	return readyConn{conn}, func() { conn.Close(); creds.Close() }, nil
}

// adsProtocol is the protocol of an aggregated stream of variant api.
func adsProtocol(ads discoveryv3.AggregatedDiscoveryServiceClient, api bootstrap.APIType) protocol {
	if api == bootstrap.APITypeAggregatedDeltaGRPC {
		return deltaProtocol{open: func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], error) {
			return ads.DeltaAggregatedResources(ctx)
		}}
	}
	return sotwProtocol{open: func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error) {
		return ads.StreamAggregatedResources(ctx)
	}}
}

// buildADS returns the transport of a server spoken to over one ADS stream.
func (b grpcBuilder) buildADS(server bootstrap.ServerConfig, node *corev3.Node, h Handler) (Transport, error) {
	cc, release, err := b.dial(server)
	if err != nil {
		return nil, err
	}
	p := adsProtocol(discoveryv3.NewAggregatedDiscoveryServiceClient(cc), server.APIType)
	opts := b.opts
	opts.Logger = opts.Logger.With("server", server.ServerURI, "protocol", server.APIType.String())
	return &adsTransport{runner: newRunner(p, h, node, opts), release: release}, nil
}

// adsTransport is one ADS stream over one gRPC channel.
type adsTransport struct {
	runner  *runner
	release func() // closes the channel and its credentials
}

func (t *adsTransport) UpdateSubscriptions(typeURL string, add, remove []string) {
	t.runner.updateSubscriptions(typeURL, add, remove)
}

func (t *adsTransport) Close() {
	t.runner.stop()
	t.release()
}

// Reconnecting after an outage.
//
// A gRPC channel that fails to connect retries by itself, after a backoff of
// its own that grows through the outage (1 s growing by 1.6x to 120 s) and
// resets only once it connects. A stream opened fail-fast while the channel
// waits out that backoff fails at once, without the channel trying the
// server: the server's return was noticed at the channel's next attempt, and
// the stream opened at the runner's first attempt after that, the two
// backoffs added (seconds after a short outage; up to the cap after a long
// one). So a stream opened while the channel is failing makes the channel
// try now (ResetConnectBackoff) and waits for the outcome: each of the
// runner's attempts is a real connection attempt, and the delay from the
// server's return to the new stream is the runner's own backoff. The
// channel's own retries follow the runner's backoff too (channelBackoff):
// reset to its base delay by each attempt, they find a server that returns
// while an attempt waits (with the default backoff the base delay outlasts
// the wait, and the runner's next attempt finds it).
//
// A stream opened when the channel is not failing (idle, connecting, ready)
// is opened fail-fast as before, and a stream that ends is reported to the
// Handler at once; so is the first attempt of an outage, which the channel
// makes from idle and which fails with its connection attempt. Only later
// attempts of an outage, whose failure the client has been told already,
// wait (readyWait at most) before they report theirs. The wait ends with the
// stream's context: Close is not held up.

// readyWait bounds how long a stream opened on a failing channel waits for
// the connection attempt it started. The channel does not say when an
// attempt fails (pick_first stays in TRANSIENT_FAILURE until it connects), so
// a stream waits as long as a connection and its TLS handshake take on all
// but the slowest paths, then is reported failed; a slower connection goes
// on in the background, and the runner's next attempt finds it made. The
// wait is part of the attempt: a server back during it is found by the next
// attempt, as one back just after an attempt failed would be.
const readyWait = 500 * time.Millisecond

// readyConn is the channel to a management server as its streams use it: a
// stream opened while the channel is failing waits for a fresh connection
// attempt rather than failing into the channel's own backoff (see above).
type readyConn struct{ cc *grpc.ClientConn }

func (c readyConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return c.cc.Invoke(ctx, method, args, reply, opts...)
}

func (c readyConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if c.cc.GetState() == connectivity.TransientFailure {
		c.cc.ResetConnectBackoff()
		c.awaitAttempt(ctx)
	}
	// Fail-fast: in TRANSIENT_FAILURE still, the stream fails with the
	// channel's own error, which names what is wrong (connection refused,
	// a handshake failure), and the runner reports it.
	return c.cc.NewStream(ctx, desc, method, opts...)
}

// awaitAttempt waits until the channel leaves TRANSIENT_FAILURE (it does
// only by connecting, or when it is reset or closed), for readyWait at most,
// or until ctx ends.
func (c readyConn) awaitAttempt(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	for s := c.cc.GetState(); s == connectivity.TransientFailure; s = c.cc.GetState() {
		if !c.cc.WaitForStateChange(wctx, s) {
			return
		}
	}
}

// channelBackoff makes the channel's own reconnection follow the runner's
// backoff b rather than gRPC's default (the same unless Options.Backoff is
// set). A backoff the channel cannot follow (no delay, no cap) leaves gRPC's
// default. The connect timeout is gRPC's default, 20 s.
func channelBackoff(b backoff.Config) (grpc.ConnectParams, bool) {
	if b.BaseDelay <= 0 || b.MaxDelay < b.BaseDelay || b.Multiplier < 1 {
		return grpc.ConnectParams{}, false
	}
	return grpc.ConnectParams{Backoff: b, MinConnectTimeout: 20 * time.Second}, true
}
