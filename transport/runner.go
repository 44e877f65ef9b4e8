package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
)

// protocol is one wire variant (SotW or delta): how to open its stream and
// how to turn a type's state into its next request.
type protocol interface {
	isDelta() bool
	openStream(ctx context.Context) (wireStream, error)
	// requestLocked builds the next request for ts (nil when there is
	// nothing to send), the names it newly makes known to the server (nil
	// when it changes no subscription), and the reply it carries, which the
	// caller must close once sent or dropped. A reply held until later than
	// now stays with ts, unless the request goes out anyway.
	requestLocked(ts *typeState, node *corev3.Node, now time.Time) (msg proto.Message, names []string, r *reply)
	// recordReplyLocked updates ts after the client judged resp.
	recordReplyLocked(ts *typeState, resp *Response, verdict error)
}

// wireStream moves the messages of one stream. The runner never calls send
// concurrently with itself, nor recv.
type wireStream interface {
	send(proto.Message) error
	recv() (*Response, error)
}

// subscriptionReporter is a wireStream that calls
// Handler.OnSubscriptionsSent itself, once a request has really reached the
// server (REST, where "sent" is not "on a live stream"); the runner then
// does not.
type subscriptionReporter interface {
	reportsSubscriptions()
}

// streamCloser is a wireStream with goroutines of its own: close stops them
// and waits, and the runner calls it before the stream is done with.
type streamCloser interface {
	close()
}

// errSilentServer ends a stream on which the server said nothing at all.
var errSilentServer = errors.New("no response from the management server")

// errNoNonce rejects a response that came without a nonce on a stream that
// requires one.
var errNoNonce = errors.New("response without a nonce, which a stream requires to pair it with its ACK or NACK: rejected, nothing applied")

// nonceRequirer is a wireStream on which every response must carry a nonce
// (gRPC streams; REST polling makes it optional). A response without one is
// NACKed unread.
type nonceRequirer interface {
	requiresNonce()
}

// runner keeps one stream of one protocol alive for a set of types: it
// starts the stream when the first name is wanted, restarts it with backoff
// when it fails, and moves requests and responses. Each ADS transport has
// one runner for all its types.
type runner struct {
	// Read-only after newRunner.
	protocol protocol
	handler  Handler
	node     *corev3.Node
	opts     Options
	logger   *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	wake   chan struct{} // capacity 1: "there may be something to send"

	mu    sync.Mutex
	types map[string]*typeState // guarded by mu
	order []string              // type URLs in first-use order; guarded by mu
}

func newRunner(p protocol, h Handler, node *corev3.Node, opts Options) *runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{
		protocol: p,
		handler:  h,
		node:     node,
		opts:     opts,
		logger:   opts.Logger,
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
		types:    make(map[string]*typeState),
	}
	go r.run()
	return r
}

func (r *runner) updateSubscriptions(typeURL string, add, remove []string) {
	r.mu.Lock()
	r.typeLocked(typeURL).updateLocked(add, remove)
	r.mu.Unlock()
	r.signal()
}

// stop ends the runner and waits for its goroutines.
func (r *runner) stop() {
	r.cancel()
	<-r.done
}

func (r *runner) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *runner) typeLocked(typeURL string) *typeState {
	ts, ok := r.types[typeURL]
	if !ok {
		ts = newTypeState(typeURL)
		r.types[typeURL] = ts
		r.order = append(r.order, typeURL)
	}
	return ts
}

func (r *runner) run() {
	defer close(r.done)
	failures := 0
	var lastStart time.Time
	for r.waitForInterest() {
		delay := backoffDelay(r.opts.Backoff, failures)
		if !lastStart.IsZero() {
			// Even after a healthy stream, never start streams faster than
			// this: a server that answers once and hangs up must not turn
			// the client into a reconnect loop.
			if gap := r.opts.MinStreamInterval - r.clock().Now().Sub(lastStart); gap > delay {
				delay = gap
			}
		}
		if !r.sleep(delay) {
			return
		}
		lastStart = r.clock().Now()
		healthy, err := r.runStream()
		if r.ctx.Err() != nil {
			return
		}
		if healthy {
			failures = 0
		} else {
			failures++
		}
		r.logger.Warn("xDS stream ended", "err", err, "healthy", healthy)
		r.mu.Lock()
		types := append([]string(nil), r.order...)
		r.mu.Unlock()
		r.handler.OnStreamError(&StreamError{Err: err, Answered: healthy, TypeURLs: types})
	}
}

// waitForInterest blocks until some name is wanted; streams start lazily.
func (r *runner) waitForInterest() bool {
	for {
		r.mu.Lock()
		wanted := false
		for _, ts := range r.types {
			if len(ts.names)+len(ts.resubscribe) > 0 {
				wanted = true
				break
			}
		}
		r.mu.Unlock()
		if wanted {
			return true
		}
		select {
		case <-r.wake:
		case <-r.ctx.Done():
			return false
		}
	}
}

// StreamClock is the time source that paces the starts of ADS streams
// (Options.Clock). The client's Clock and testutils.FakeClock implement it.
type StreamClock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned timer is stopped first.
	AfterFunc(d time.Duration, f func()) interface{ Stop() bool }
}

// realClock is the StreamClock of the time package.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	return time.AfterFunc(d, f)
}

// clock is Options.Clock, or the real clock.
func (r *runner) clock() StreamClock {
	if r.opts.Clock == nil {
		return realClock{}
	}
	return r.opts.Clock
}

// sleep waits d on the runner's clock, or less if the runner stops first;
// it reports whether the runner is still live.
func (r *runner) sleep(d time.Duration) bool {
	if d <= 0 {
		return r.ctx.Err() == nil
	}
	fired := make(chan struct{})
	t := r.clock().AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// runStream runs one stream until it fails. healthy reports whether the
// server answered at least once, which resets the backoff.
func (r *runner) runStream() (healthy bool, err error) {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	ws, err := r.protocol.openStream(ctx)
	if err != nil {
		return false, fmt.Errorf("start stream: %w", err)
	}
	if c, ok := ws.(streamCloser); ok {
		defer c.close()
	}
	r.resetTypesForStream()
	r.logger.Debug("xDS stream started")

	var answered atomic.Bool
	recvDone := make(chan error, 1)
	go func() { recvDone <- r.recvLoop(ctx, ws, &answered) }()
	finish := func(err error) (bool, error) {
		cancel()
		if rerr := <-recvDone; err == nil {
			err = rerr
		}
		return answered.Load(), err
	}

	var silence *time.Timer
	var silenceC <-chan time.Time
	// held wakes the sender when the earliest held NACK is due.
	held := time.NewTimer(time.Hour)
	held.Stop()
	defer func() {
		if silence != nil {
			silence.Stop()
		}
		held.Stop()
	}()
	node := r.node // the first request on the stream carries the node
	for {
		sent, next, err := r.sendPending(ws, &node)
		if err != nil {
			return finish(fmt.Errorf("send request: %w", err))
		}
		if sent && silence == nil && r.opts.SilenceTimeout > 0 && !answered.Load() {
			silence = time.NewTimer(r.opts.SilenceTimeout)
			silenceC = silence.C
		}
		var heldC <-chan time.Time
		if !next.IsZero() {
			held.Reset(time.Until(next))
			heldC = held.C
		}
		select {
		case <-heldC:
		case <-r.wake:
		case err := <-recvDone:
			if errors.Is(err, io.EOF) {
				err = errors.New("stream closed by the management server")
			}
			return answered.Load(), err
		case <-silenceC:
			silenceC = nil
			if !answered.Load() {
				return finish(fmt.Errorf("%w within %v", errSilentServer, r.opts.SilenceTimeout))
			}
		case <-ctx.Done():
			return finish(ctx.Err())
		}
	}
}

// resetTypesForStream forgets what the previous stream was told. For delta
// it first asks the client what it holds, outside the lock, since the handler
// takes locks of its own.
func (r *runner) resetTypesForStream() {
	r.mu.Lock()
	urls := append([]string(nil), r.order...)
	r.mu.Unlock()
	held := make(map[string]map[string]string, len(urls))
	if r.protocol.isDelta() {
		for _, u := range urls {
			held[u] = r.handler.ResourceVersions(u)
		}
	}
	r.mu.Lock()
	for _, u := range r.order {
		r.types[u].resetForStreamLocked(held[u])
	}
	r.mu.Unlock()
}

type outgoing struct {
	typeURL string
	msg     proto.Message
	names   []string
	reply   *reply
}

// sendPending sends one request for each type with something to say. next
// is when the earliest reply still held falls due (zero if none is).
func (r *runner) sendPending(ws wireStream, node **corev3.Node) (sent bool, next time.Time, err error) {
	var outs []outgoing
	now := time.Now()
	r.mu.Lock()
	for _, u := range r.order {
		ts := r.types[u]
		msg, names, rep := r.protocol.requestLocked(ts, *node, now)
		if due, ok := ts.heldUntilLocked(); ok && (next.IsZero() || due.Before(next)) {
			next = due
		}
		if msg == nil {
			if rep != nil {
				close(rep.sent)
			}
			continue
		}
		*node = nil
		outs = append(outs, outgoing{typeURL: u, msg: msg, names: names, reply: rep})
	}
	// Names held back until their removal was sent go in the next request.
	again := false
	for _, u := range r.order {
		again = again || r.types[u].subsChanged
	}
	r.mu.Unlock()
	if again {
		defer r.signal()
	}
	for i, o := range outs {
		if err := ws.send(o.msg); err != nil {
			for _, rest := range outs[i:] {
				if rest.reply != nil {
					close(rest.reply.sent)
				}
			}
			return false, time.Time{}, err
		}
		if o.reply != nil {
			close(o.reply.sent)
		}
		if r.logger.Enabled(context.Background(), slog.LevelDebug) {
			r.logger.Debug("xDS request sent", "type", o.typeURL, "request", o.msg)
		}
		if _, self := ws.(subscriptionReporter); o.names != nil && !self {
			r.handler.OnSubscriptionsSent(o.typeURL, o.names)
		}
	}
	return len(outs) > 0, next, nil
}

// recvLoop hands each response to the handler and queues its ACK or NACK.
// It reads the next one once the handler has called done and, unless the
// reply is held, once the reply is on the wire.
//
// A server that resends a rejected response at once on every NACK (stock
// go-control-plane's caches do: a NACK carries the last accepted version,
// which differs from theirs, envoyproxy/go-control-plane#962) would make a
// tight NACK loop. Repeats of one NACK are therefore held, longer each time
// (Options.NACKBackoff), but only the reply is held, never this loop: the
// other types' responses flow meanwhile, and a newer response of the held
// type replaces the held NACK with its own reply.
func (r *runner) recvLoop(ctx context.Context, ws wireStream, answered *atomic.Bool) error {
	for {
		resp, err := ws.recv()
		if err != nil {
			return err
		}
		r.logResponse(resp)
		if r.unsolicited(resp) {
			continue
		}
		r.mu.Lock()
		r.typeLocked(resp.TypeURL).judging = !r.protocol.isDelta()
		r.mu.Unlock()
		applied := make(chan struct{})
		var verdict error
		if _, required := ws.(nonceRequirer); required && resp.Nonce == "" {
			// Not the client's to judge: it is not applied, and is no
			// answer either.
			verdict = errNoNonce
			close(applied)
		} else {
			answered.Store(true)
			var once sync.Once
			verdict = r.handler.OnResponse(resp, func() { once.Do(func() { close(applied) }) })
		}
		if verdict != nil {
			r.logger.Warn("NACK", "type", resp.TypeURL, "version", resp.Version, "nonce", resp.Nonce, "err", verdict)
		}
		rep := &reply{nonce: resp.Nonce, err: verdict, sent: make(chan struct{})}
		r.mu.Lock()
		ts := r.typeLocked(resp.TypeURL)
		hold := ts.nackDelayLocked(r.opts.NACKBackoff, resp.Version, verdict)
		r.protocol.recordReplyLocked(ts, resp, verdict)
		var due time.Time
		if hold > 0 {
			due = time.Now().Add(hold)
		}
		ts.oweReplyLocked(rep, due)
		r.mu.Unlock()
		if hold > 0 {
			r.logger.Debug("holding a repeated NACK", "type", resp.TypeURL, "version", resp.Version, "hold", hold)
		}
		r.signal()
		waits := []chan struct{}{rep.sent, applied}
		if hold > 0 {
			waits = waits[1:]
		}
		for _, ch := range waits {
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// logResponse logs resp at debug level, as requests are, by what a reader
// of the log needs to match it to its reply: its type, version and nonce,
// and how many resources it carries. The resources themselves are left out:
// a response can hold tens of thousands, where a request holds names.
func (r *runner) logResponse(resp *Response) {
	if !r.logger.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	if resp.Delta {
		r.logger.Debug("xDS response received", "type", resp.TypeURL, "version", resp.Version, "nonce", resp.Nonce,
			"resources", len(resp.DeltaResources), "removed", len(resp.Removed), "resource_errors", len(resp.ResourceErrors))
		return
	}
	r.logger.Debug("xDS response received", "type", resp.TypeURL, "version", resp.Version, "nonce", resp.Nonce,
		"resources", len(resp.Resources), "resource_errors", len(resp.ResourceErrors))
}

// unsolicited reports whether resp is of a type the client has not asked
// for on this stream: none of its names wanted, or none sent yet. Such a
// response is ignored, as Envoy does, and gets no reply: applying nothing,
// the client must not adopt its version, or the first real request of the
// type would claim a version the client never applied and a server could
// skip sending it; and a reply with the old version would read to a
// snapshot cache as a request for what it just sent, a loop. Its nonce is
// kept for a type the stream has carried (SotW requests carry the latest
// nonce); a type never used keeps no state, and its first request carries
// no nonce, which servers take as a fresh request.
func (r *runner) unsolicited(resp *Response) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.types[resp.TypeURL]
	if ts != nil && ts.sentOnStream && len(ts.names) > 0 {
		return false
	}
	if ts != nil && resp.Nonce != "" && !r.protocol.isDelta() {
		ts.nonce = resp.Nonce
	}
	r.logger.Warn("ignoring a response of a type not subscribed to", "type", resp.TypeURL, "version", resp.Version, "nonce", resp.Nonce)
	return true
}
