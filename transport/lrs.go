package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/bootstrap"
)

// lrsClientFeature tells the server that the client honours
// send_all_clusters, as gRPC clients say in their first LoadStatsRequest.
const lrsClientFeature = "envoy.lrs.supports_send_all_clusters"

// LoadSource supplies the load an LRS stream reports. The client's
// LoadStore implements it.
type LoadSource interface {
	// LoadStats returns the load of the clusters named, or of every
	// cluster when all is set, since the previous call, and starts a new
	// interval. Clusters with nothing to report are left out.
	LoadStats(clusters []string, all bool) []*endpointv3.ClusterStats
}

// Clock runs the report interval timers of LRS streams. The client's Clock
// implements it.
type Clock interface {
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned timer is stopped first.
	AfterFunc(d time.Duration, f func()) interface{ Stop() bool }
}

// LoadReporter is an LRS stream to one server. Close stops it, after a
// last report of the load counted since the previous one if the server has
// asked for reports: the report is sent, the stream half-closed, and Close
// waits at most FinalReportTimeout for the server to end it. Once Close
// returns, none of its goroutines runs and src is not called again.
type LoadReporter interface {
	Close()
}

// FinalReportTimeout bounds how long LoadReporter.Close waits for the last
// report to be sent, as gRPC bounds it.
const FinalReportTimeout = time.Second

// LoadReportingBuilder is a Builder that can also report load over LRS
// (envoy.service.load_stats.v3.LoadReportingService). The Builder of
// NewBuilder is one.
type LoadReportingBuilder interface {
	// BuildLoadReporter starts reporting the load of src to server: it
	// opens a LoadStatsRequest stream identified by node (with the client
	// feature envoy.lrs.supports_send_all_clusters added), and at each
	// load_reporting_interval the server asks for sends the load of the
	// clusters it named. A failed stream is opened again with the
	// transport's backoff. It does not wait for the server.
	BuildLoadReporter(server bootstrap.ServerConfig, node *corev3.Node, src LoadSource, clock Clock) (LoadReporter, error)
}

// BuildLoadReporter implements LoadReportingBuilder. It dials a channel of
// its own to the server, with the same credentials and dial options as the
// server's ADS transport: the load reporting service is another service of
// the same server, with a life of its own (it starts with the first cluster
// that reports load, not with the first watch).
func (b grpcBuilder) BuildLoadReporter(server bootstrap.ServerConfig, node *corev3.Node, src LoadSource, clock Clock) (LoadReporter, error) {
	if server.APIType == bootstrap.APITypeREST || server.APIType == bootstrap.APITypeFilesystem {
		return nil, fmt.Errorf("xDS server %s: api_type %v has no load reporting service", server.ServerURI, server.APIType)
	}
	cc, release, err := b.dial(server)
	if err != nil {
		return nil, err
	}
	n := proto.Clone(node).(*corev3.Node)
	if !slices.Contains(n.ClientFeatures, lrsClientFeature) {
		n.ClientFeatures = append(n.ClientFeatures, lrsClientFeature)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &lrsReporter{
		lrs:      lrsv3.NewLoadReportingServiceClient(cc),
		node:     n,
		src:      src,
		clock:    clock,
		opts:     b.opts,
		logger:   b.opts.Logger.With("server", server.ServerURI, "protocol", "LRS"),
		cancel:   cancel,
		release:  release,
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	r.wg.Add(1)
	go r.run(ctx)
	return r, nil
}

// lrsReporter is one LRS stream at a time to one server, and its restarts.
// Everything but Close runs on the run goroutine (and its receiver).
type lrsReporter struct {
	lrs     lrsv3.LoadReportingServiceClient
	node    *corev3.Node // with lrsClientFeature
	src     LoadSource
	clock   Clock
	opts    Options
	logger  *slog.Logger
	cancel  context.CancelFunc
	release func() // closes the channel and its credentials
	wg      sync.WaitGroup
	once    sync.Once
	// stopping is closed by Close: the stream sends its last report and
	// run returns, closing done.
	stopping chan struct{}
	done     chan struct{}
}

func (r *lrsReporter) Close() {
	r.once.Do(func() {
		close(r.stopping)
		t := time.NewTimer(FinalReportTimeout)
		select {
		case <-r.done:
		case <-t.C:
			r.logger.Warn("the LRS stream did not end in time after the last load report; cancelling it", "timeout", FinalReportTimeout)
		}
		t.Stop()
		r.cancel()
		r.wg.Wait()
		r.release()
	})
}

// run opens streams until the reporter is closed, waiting between them as
// the ADS transport does: backoff after a stream the server never answered,
// and at least MinStreamInterval between two starts.
func (r *lrsReporter) run(ctx context.Context) {
	defer r.wg.Done()
	defer close(r.done)
	failures := 0
	var lastStart time.Time
	for {
		wait := backoffDelay(r.opts.Backoff, failures)
		if !lastStart.IsZero() {
			wait = max(wait, r.opts.MinStreamInterval-time.Since(lastStart))
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-r.stopping:
				t.Stop()
				return
			case <-t.C:
			}
		}
		lastStart = time.Now()
		answered, err := r.stream(ctx)
		select {
		case <-r.stopping:
			return
		default:
		}
		if ctx.Err() != nil {
			return
		}
		if answered {
			failures = 0
		} else {
			failures++
		}
		r.logger.Warn("load reporting stream ended; restarting", "err", err, "answered", answered)
	}
}

// stream runs one LRS stream to its end, and reports whether the server
// sent a valid response on it.
func (r *lrsReporter) stream(ctx context.Context) (answered bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := r.lrs.StreamLoadStats(sctx)
	if err != nil {
		return false, err
	}
	if err := st.Send(&lrsv3.LoadStatsRequest{Node: r.node}); err != nil {
		return false, err
	}
	resps := make(chan *lrsv3.LoadStatsResponse)
	recvErr := make(chan error, 1)
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			m, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case resps <- m:
			case <-sctx.Done():
				return
			}
		}
	}()
	// The receiver ends once the stream's context is cancelled.
	defer func() { cancel(); <-recvDone }()

	var (
		clusters []string
		all      bool
		interval time.Duration
		timer    interface{ Stop() bool }
	)
	// tick holds at most one pending report: a timer firing after the
	// stream ended finds it full or unread, and never blocks.
	tick := make(chan struct{}, 1)
	arm := func() {
		timer = r.clock.AfterFunc(interval, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return answered, ctx.Err()
		case <-r.stopping:
			if timer == nil { // the server has asked for nothing yet
				return answered, nil
			}
			req := &lrsv3.LoadStatsRequest{ClusterStats: r.src.LoadStats(clusters, all)}
			if err := st.Send(req); err != nil {
				return answered, fmt.Errorf("sending the last load report: %w", err)
			}
			// Half-close and wait for the server to end the stream, so
			// that cancelling it cannot drop the report on its way; Close
			// cancels after FinalReportTimeout if the server does not.
			st.CloseSend()
			select {
			case <-recvErr:
			case <-ctx.Done():
			}
			return answered, nil
		case err := <-recvErr:
			return answered, err
		case m := <-resps:
			d := m.GetLoadReportingInterval()
			if err := d.CheckValid(); err != nil || d.AsDuration() <= 0 {
				return answered, fmt.Errorf("LoadStatsResponse: load_reporting_interval %v is not a positive duration", d.AsDuration())
			}
			answered = true
			clusters, all = m.GetClusters(), m.GetSendAllClusters()
			r.logger.Debug("LoadStatsResponse", "clusters", clusters, "send_all_clusters", all, "interval", d.AsDuration())
			if timer == nil || d.AsDuration() != interval {
				// The interval starts again from this response; the load
				// counted so far goes in the first report.
				if timer != nil {
					timer.Stop()
				}
				interval = d.AsDuration()
				arm()
			}
		case <-tick:
			req := &lrsv3.LoadStatsRequest{ClusterStats: r.src.LoadStats(clusters, all)}
			if err := st.Send(req); err != nil {
				return answered, fmt.Errorf("sending a load report: %w", err)
			}
			arm()
		}
	}
}

// errNoLoadReporting is returned for a Builder that cannot report load.
var errNoLoadReporting = errors.New("the transport builder cannot report load (it is no transport.LoadReportingBuilder)")

// NewLoadReporter starts reporting src's load to server with b, if b is a
// LoadReportingBuilder; otherwise it returns an error saying so.
func NewLoadReporter(b Builder, server bootstrap.ServerConfig, node *corev3.Node, src LoadSource, clock Clock) (LoadReporter, error) {
	lb, ok := b.(LoadReportingBuilder)
	if !ok {
		return nil, fmt.Errorf("xDS server %s: %w", server.ServerURI, errNoLoadReporting)
	}
	return lb.BuildLoadReporter(server, node, src, clock)
}
