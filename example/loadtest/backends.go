package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Backend behaviours of a channel run (-channel).
const (
	// backendsReachable: a gRPC server answers every endpoint, so the
	// channel's subchannels go READY and RPCs are served.
	backendsReachable = "reachable"
	// backendsUnreachable: a TCP listener accepts every connection and
	// never speaks. The TCP connect succeeds, the HTTP/2 handshake never
	// completes: subchannels stay CONNECTING until gRPC's connect deadline
	// (20 s), then go TRANSIENT_FAILURE and retry with backoff. These are
	// the subchannels that never connect of issue 16 (a firewall that
	// drops, a zone down), not a refused connection, which fails at once.
	backendsUnreachable = "unreachable"
	// backendsRefused: nothing listens on the endpoints' port, so every
	// connection is refused at once: subchannels go TRANSIENT_FAILURE and
	// retry with backoff, holding no socket and no transport. What the
	// channel costs on top of the xDS client without the connections'
	// own cost; the backends see nothing, so connecting and applying are
	// not measured.
	backendsRefused = "refused"
)

// backends is the one listener, on the wildcard address, that serves every
// endpoint of the world in a channel run. It records when a connection
// first arrives at each endpoint address (the connection's local address):
// the server-side sign, the same for goxds and grpc-go, that a channel has
// taken an endpoint into its balancer and started connecting to it.
type backends struct {
	// Read-only after startBackends.
	mode string
	port uint32
	lis  net.Listener
	gs   *grpc.Server // reachable only

	// all is closed when want distinct addresses have had a connection:
	// every endpoint of the initial world.
	all  chan struct{}
	want int

	mu      sync.Mutex
	first   map[string]time.Time // endpoint IP → first accepted connection; guarded by mu
	waits   []*connectWait       // guarded by mu
	conns   map[net.Conn]bool    // unreachable: connections held; guarded by mu
	closed  bool                 // guarded by mu
	serving sync.WaitGroup       // the accept loop and the held connections' readers
}

// connectWait waits for the first connection to any of a set of addresses.
type connectWait struct {
	hosts map[string]bool
	at    time.Time
	done  chan struct{}
}

// startBackends starts the backends of mode; want is the number of
// endpoints of the initial world.
func startBackends(mode string, want int) (*backends, error) {
	lis, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		return nil, fmt.Errorf("backends: %w", err)
	}
	b := &backends{mode: mode, port: uint32(lis.Addr().(*net.TCPAddr).Port), first: make(map[string]time.Time),
		conns: make(map[net.Conn]bool), all: make(chan struct{}), want: want}
	b.lis = &recordingListener{Listener: lis, b: b}
	switch mode {
	case backendsReachable:
		// Small buffers: the server holds one connection per endpoint of
		// the world (30,000 at 10k × 3), and its memory is not what is
		// measured, but it shares the machine with the client.
		b.gs = grpc.NewServer(grpc.UnknownServiceHandler(answerProbe), grpc.ReadBufferSize(4096), grpc.WriteBufferSize(0))
		b.serving.Add(1)
		go func() {
			defer b.serving.Done()
			_ = b.gs.Serve(b.lis)
		}()
	case backendsUnreachable:
		b.serving.Add(1)
		go func() {
			defer b.serving.Done()
			b.holdAll()
		}()
	case backendsRefused:
		// The port was free a moment ago; closed, it refuses. Nothing else
		// binds it short of another process drawing the same ephemeral
		// port, which a run would show as connections accepted.
		lis.Close()
		b.lis = nil
	default:
		lis.Close()
		return nil, fmt.Errorf("backends %q: want %s, %s or %s", mode, backendsReachable, backendsUnreachable, backendsRefused)
	}
	return b, nil
}

// answerProbe serves every method of every service: it answers with the
// address the RPC arrived at, the endpoint the channel picked.
func answerProbe(_ any, stream grpc.ServerStream) error {
	if err := stream.RecvMsg(&emptypb.Empty{}); err != nil {
		return err
	}
	at := ""
	if p, ok := peer.FromContext(stream.Context()); ok && p.LocalAddr != nil {
		at = p.LocalAddr.String()
	}
	return stream.SendMsg(wrapperspb.String(at))
}

// holdAll accepts connections and never writes: each is read (so that the
// client's close is seen and the socket freed) until the client gives up.
func (b *backends) holdAll() {
	for {
		c, err := b.lis.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			c.Close()
			return
		}
		b.conns[c] = true
		b.serving.Add(1)
		b.mu.Unlock()
		go func() {
			defer b.serving.Done()
			_, _ = io.Copy(io.Discard, c)
			c.Close()
			b.mu.Lock()
			delete(b.conns, c)
			b.mu.Unlock()
		}()
	}
}

// recordingListener notes the address each accepted connection arrived at.
type recordingListener struct {
	net.Listener
	b *backends
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
			l.b.accepted(a.IP.String(), time.Now())
		}
	}
	return c, err
}

func (b *backends) accepted(host string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, seen := b.first[host]; seen {
		return
	}
	b.first[host] = now
	if len(b.first) == b.want {
		close(b.all)
	}
	kept := b.waits[:0]
	for _, w := range b.waits {
		if w.hosts[host] {
			w.at = now
			close(w.done)
			continue
		}
		kept = append(kept, w)
	}
	b.waits = kept
}

// expect returns a wait for the first connection to any of hosts; call it
// before the change that makes the channel connect to them.
func (b *backends) expect(hosts []string) *connectWait {
	w := &connectWait{hosts: make(map[string]bool, len(hosts)), done: make(chan struct{})}
	for _, h := range hosts {
		w.hosts[h] = true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range hosts {
		if at, ok := b.first[h]; ok {
			w.at = at
			close(w.done)
			return w
		}
	}
	b.waits = append(b.waits, w)
	return w
}

// connected returns how many distinct endpoint addresses have had a
// connection, and when the last of them first did.
func (b *backends) connected() (hosts int, last time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, at := range b.first {
		if at.After(last) {
			last = at
		}
	}
	return len(b.first), last
}

func (b *backends) stop() {
	if b.lis == nil { // refused: nothing to stop
		return
	}
	if b.gs != nil {
		b.gs.Stop() // closes the listener and every connection
	} else {
		b.lis.Close()
		b.mu.Lock()
		b.closed = true
		for c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
	}
	b.serving.Wait()
}

// hostsOf returns the endpoint addresses of cluster i at round.
func hostsOf(n, i, m, round int) []string {
	hs := make([]string, m)
	for p := range hs {
		k := i*m + p
		if round > 0 {
			k = n*m + round*m + p
		}
		hs[p] = endpointHost(k)
	}
	return hs
}

// raiseFileLimit raises this process's open-file limit to want, as far as
// it may: a channel holds a socket per endpoint (30,000 at 10k × 3), and so
// does the backends' side. Root may raise the hard limit too (up to
// fs.nr_open); anyone else only the soft one, up to the hard. It returns
// the soft limit in force.
func raiseFileLimit(want uint64) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur >= want {
		return lim.Cur
	}
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if nrOpen, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			want = min(want, nrOpen)
		}
	}
	if want > lim.Max {
		up := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up) == nil {
			return want
		}
		want = lim.Max
	}
	up := syscall.Rlimit{Cur: want, Max: lim.Max}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up) != nil {
		return lim.Cur
	}
	return want
}

// fileLimit is this process's open-file soft limit, 0 if unknown.
func fileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}

// filesSpare are the open files a channel run keeps apart from the
// endpoints' sockets: the xDS stream, the runtime, /proc reads, and
// sockets of unreachable endpoints that linger while they reconnect.
const filesSpare = 2048

// healthyFor is how many endpoints of each of n clusters of m can be
// healthy, each with a socket in the client and one in the backends,
// under the open-file limit: all m if they fit, else as many as do, and 0
// if not even one per cluster does (the run cannot be made: every cluster
// needs a backend). The limit has been raised as far as it goes
// (runMatrix); the child's is the same.
func healthyFor(n, m int, limit uint64) int {
	if limit == 0 || uint64(n*m)+filesSpare <= limit {
		return m
	}
	if limit <= filesSpare {
		return 0
	}
	return min(m, int(limit-filesSpare)/n)
}

// fileLimitFor is the open-file limit a run of so many endpoints needs:
// a socket per endpoint, twice over for the reconnections of unreachable
// endpoints, whose old sockets may linger, and room for the rest.
func fileLimitFor(endpoints int) uint64 { return uint64(2*endpoints + 4096) }
