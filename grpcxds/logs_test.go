package grpcxds_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// The resolver and balancer log their decisions at debug level (the
// configuration applied, a failover from a priority that did not connect
// in time, the switch of priority it makes) and their failures at warning
// level (a cluster with no usable endpoint, one that does not exist, a
// listener gone), each naming
// the listener or cluster, to Options.Logger.
func TestLogsDecisionsAndFailures(t *testing.T) {
	t.Parallel()
	logger, sink := newLogSink()
	// fail_on_data_errors: the listener's deletion drops it (gRFC A88).
	e := newEnvWithFeatures(t, grpcxds.Options{FailoverTimeout: 100 * time.Millisecond, Logger: logger}, bootstrap.FeatureFailOnDataErrors)
	silent := blackHole(t)
	p1 := startBackend(t, "p1")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), testutils.Endpoints("A", []testutils.EndpointSpec{
		{Host: "127.0.0.1", Port: silent, Locality: testutils.Locality{Zone: "z0"}},
		{Host: "127.0.0.1", Port: p1.port, Locality: testutils.Locality{Zone: "z1"}, Priority: 1},
	})))
	conn := e.dial(grpc.WithConnectParams(grpc.ConnectParams{Backoff: fastBackoff, MinConnectTimeout: time.Minute}))
	e.waitServed(conn, 1, func(name string) bool { return name == "p1" })
	sink.want(e.ctx, t, slog.LevelDebug, "xDS configuration applied", map[string]string{"listener": listener, "route_config": "greeter-route", "clusters": "1"})
	sink.want(e.ctx, t, slog.LevelDebug, "cluster failover: priority still connecting after the failover timeout", map[string]string{"cluster": "A", "priority": "0"})
	sink.want(e.ctx, t, slog.LevelDebug, "cluster priority switch", map[string]string{"cluster": "A", "from": "0", "to": "1", "leaf": "A"})

	// The only endpoint left refuses connections: a failure.
	p1.stop()
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", p1)))
	sink.want(e.ctx, t, slog.LevelWarn, "cluster has no usable endpoint; its RPCs fail", map[string]string{"cluster": "A"})

	// The route sends to a cluster that does not exist.
	e.update(tree(routes(toCluster(prefix("/"), "gone")), clusters("A"), eds("A", p1)))
	sink.want(e.ctx, t, slog.LevelWarn, "cluster unusable", map[string]string{"cluster": "gone"})

	// The listener is deleted: the channel has no configuration left.
	e.update(testutils.Resources{})
	sink.want(e.ctx, t, slog.LevelWarn, "no usable xDS configuration: RPCs fail until there is one", map[string]string{"listener": listener})
}

// logSink records log lines and lets a test wait for one.
type logSink struct {
	mu      sync.Mutex
	records []logLine
	changed chan struct{} // closed and replaced on each record
}

type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (l logLine) String() string { return fmt.Sprintf("%v %q %v", l.level, l.msg, l.attrs) }

func newLogSink() (*slog.Logger, *logSink) {
	s := &logSink{changed: make(chan struct{})}
	return slog.New(&sinkHandler{sink: s}), s
}

// want waits for a line at level with message msg and the attributes in
// attrs, and fails the test at ctx's deadline.
func (s *logSink) want(ctx context.Context, t *testing.T, level slog.Level, msg string, attrs map[string]string) {
	t.Helper()
	seen := 0
	for {
		s.mu.Lock()
		records, changed := s.records, s.changed
		s.mu.Unlock()
	lines:
		for _, r := range records[seen:] {
			if r.level != level || r.msg != msg {
				continue
			}
			for k, v := range attrs {
				if r.attrs[k] != v {
					continue lines
				}
			}
			return
		}
		seen = len(records)
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no %v line %q with %v; got:\n%v", level, msg, attrs, records)
		}
	}
}

type sinkHandler struct {
	sink  *logSink
	attrs []slog.Attr
}

func (h *sinkHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *sinkHandler) Handle(_ context.Context, r slog.Record) error {
	line := logLine{level: r.Level, msg: r.Message, attrs: make(map[string]string)}
	for _, a := range h.attrs {
		line.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		line.attrs[a.Key] = a.Value.String()
		return true
	})
	h.sink.mu.Lock()
	h.sink.records = append(h.sink.records, line)
	close(h.sink.changed)
	h.sink.changed = make(chan struct{})
	h.sink.mu.Unlock()
	return nil
}

func (h *sinkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &sinkHandler{sink: h.sink, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

// WithGroup is not used by grpcxds; groups are flattened.
func (h *sinkHandler) WithGroup(string) slog.Handler { return h }
