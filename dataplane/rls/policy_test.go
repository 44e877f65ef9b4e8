package rls

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goxds/xds/testutils"
)

// A Policy's lookups end with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 10 * time.Second

// fakeClock is a testutils.FakeClock as a Clock.
type fakeClock struct{ *testutils.FakeClock }

func (c fakeClock) AfterFunc(d time.Duration, f func()) Timer { return c.FakeClock.AfterFunc(d, f) }

// call is one lookup the fake service received, waiting for its reply.
type call struct {
	ctx   context.Context
	req   *LookupRequest
	reply chan reply
}

type reply struct {
	resp *LookupResponse
	err  error
}

// fakeService is a Lookuper whose lookups the test answers.
type fakeService struct {
	target string
	calls  chan *call
	closed chan struct{}
}

func (s *fakeService) Lookup(ctx context.Context, req *LookupRequest) (*LookupResponse, error) {
	c := &call{ctx: ctx, req: req, reply: make(chan reply, 1)}
	s.calls <- c
	select {
	case r := <-c.reply:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *fakeService) Close() { close(s.closed) }

// fakeHost records the targets held and counts repicks.
type fakeHost struct {
	mu      sync.Mutex
	live    map[string]int // holds by target
	adds    map[string]int // AddTarget calls by target
	repicks int
	wake    chan struct{} // closed and replaced at each repick
}

func (h *fakeHost) AddTarget(target string) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live[target]++
	h.adds[target]++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.live[target]--; h.live[target] == 0 {
				delete(h.live, target)
			}
		})
	}
}

func (h *fakeHost) Repick() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.repicks++
	close(h.wake)
	h.wake = make(chan struct{})
}

// repickCount returns the repicks so far.
func (h *fakeHost) repickCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.repicks
}

// waitRepick waits for a repick after the n'th.
func (h *fakeHost) waitRepick(ctx context.Context, t testing.TB, n int) {
	t.Helper()
	for {
		h.mu.Lock()
		done, wake := h.repicks > n, h.wake
		h.mu.Unlock()
		if done {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			t.Fatal("no repick came")
		}
	}
}

// held returns the targets held, and how many holds each has.
func (h *fakeHost) held() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.live))
	for k, v := range h.live {
		out[k] = v
	}
	return out
}

// env is a Policy on a fake clock, host and lookup service.
type env struct {
	t           testing.TB
	ctx         context.Context
	clock       fakeClock
	host        *fakeHost
	pol         *Policy
	mu          sync.Mutex
	services    []*fakeService
	backToReady func()
	failing     map[string]bool
}

// newEnv starts a Policy with the route lookup config rlc; draw is every
// random draw (0.5: backoff without jitter).
func newEnv(t testing.TB, rlc string, draw float64) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, clock: fakeClock{testutils.NewFakeClock(time.Unix(1000, 0))},
		host: &fakeHost{live: make(map[string]int), adds: make(map[string]int), wake: make(chan struct{})}}
	e.pol = New(Options{Host: e.host, Dial: e.dial, Clock: e.clock, Rand: func() float64 { return draw }})
	t.Cleanup(e.pol.Close)
	if err := e.pol.Update(mustParse(t, rlc)); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) dial(target string, backToReady func()) (Lookuper, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &fakeService{target: target, calls: make(chan *call, 100), closed: make(chan struct{})}
	e.services = append(e.services, s)
	e.backToReady = backToReady
	return s, nil
}

// service returns the lookup service dialed last.
func (e *env) service() *fakeService {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.services[len(e.services)-1]
}

// pick picks for a request to /s/m with header x-k: key.
func (e *env) pick(key string) Result {
	return e.pol.Pick(&Request{Path: "/s/m", Headers: headers{"x-k": {key}}}, func(t string) bool { return e.failing[t] })
}

// nextCall waits for the next lookup.
func (e *env) nextCall() *call {
	e.t.Helper()
	select {
	case c := <-e.service().calls:
		return c
	case <-e.ctx.Done():
		e.t.Fatal("no lookup came")
		return nil
	}
}

// answer replies to c and waits until the Policy has taken the reply (it
// repicks then).
func (e *env) answer(c *call, resp *LookupResponse, err error) {
	e.t.Helper()
	n := e.host.repickCount()
	c.reply <- reply{resp, err}
	e.host.waitRepick(e.ctx, e.t, n)
}

// lookUp picks for key, which must start a lookup, and answers it with
// targets.
func (e *env) lookUp(key string, headerData string, targets ...string) {
	e.t.Helper()
	if r := e.pick(key); !r.Queue {
		e.t.Fatalf("pick for %q: %+v; want it queued for a lookup", key, r)
	}
	e.answer(e.nextCall(), &LookupResponse{Targets: targets, HeaderData: headerData}, nil)
}

// closeAndCountLookups closes the Policy and returns the lookups left
// unread: every lookup goroutine has returned once Close has.
func (e *env) closeAndCountLookups() int {
	e.pol.Close()
	n := 0
	for _, s := range e.services {
		n += len(s.calls)
	}
	return n
}

const keyedConfig = `{"grpcKeybuilders": [{"names": [{"service": "s"}], "headers": [{"key": "k", "names": ["x-k"]}]}],
	"lookupService": "rls.test:1", "cacheSizeBytes": "1000"`

// A request without an answer waits for one lookup of its keys (however
// many requests ask meanwhile); the answer serves the next requests from
// the cache, with its header data.
func TestLookupOnceThenCached(t *testing.T) {
	e := newEnv(t, keyedConfig+`}`, 0.5)
	if r := e.pick("a"); !r.Queue {
		t.Fatalf("first pick: %+v; want queued", r)
	}
	c := e.nextCall()
	if c.req.TargetType != "grpc" || c.req.Reason != ReasonMiss || len(c.req.KeyMap) != 1 || c.req.KeyMap["k"] != "a" {
		t.Errorf("lookup %+v; want target type grpc, reason MISS, keys k=a", c.req)
	}
	if r := e.pick("a"); !r.Queue {
		t.Errorf("pick while the lookup is in flight: %+v; want queued", r)
	}
	e.answer(c, &LookupResponse{Targets: []string{"A"}, HeaderData: "hd"}, nil)
	for range 3 {
		if r := e.pick("a"); r.Target != "A" || r.HeaderData != "hd" || r.Default || r.Err != nil {
			t.Errorf("pick after the answer: %+v; want A with header data hd", r)
		}
	}
	if got := e.host.held(); len(got) != 1 || got["A"] != 1 {
		t.Errorf("targets held %v; want A", got)
	}
	if n := e.closeAndCountLookups(); n != 0 {
		t.Errorf("%d more lookups; want none", n)
	}
	if got := e.host.held(); len(got) != 0 {
		t.Errorf("targets held after Close: %v; want none", got)
	}
}

// A stale answer still serves, while one refresh (reason STALE, with its
// header data) runs; the refreshed answer replaces it and its targets.
// An expired one does not serve: the request waits for a new lookup.
func TestStaleAndExpired(t *testing.T) {
	e := newEnv(t, keyedConfig+`, "maxAge": "10s", "staleAge": "5s"}`, 0.5)
	e.lookUp("a", "hd1", "A")
	e.clock.Advance(6 * time.Second)
	for range 2 {
		if r := e.pick("a"); r.Target != "A" {
			t.Fatalf("pick of a stale answer: %+v; want A", r)
		}
	}
	c := e.nextCall()
	if c.req.Reason != ReasonStale || c.req.StaleHeaderData != "hd1" {
		t.Errorf("refresh %+v; want reason STALE with the stale header data", c.req)
	}
	e.answer(c, &LookupResponse{Targets: []string{"B"}, HeaderData: "hd2"}, nil)
	if r := e.pick("a"); r.Target != "B" || r.HeaderData != "hd2" {
		t.Errorf("pick after the refresh: %+v; want B with hd2", r)
	}
	if got := e.host.held(); len(got) != 1 || got["B"] != 1 {
		t.Errorf("targets held %v; want B alone", got)
	}
	e.clock.Advance(11 * time.Second)
	if r := e.pick("a"); !r.Queue {
		t.Errorf("pick of an expired answer: %+v; want queued", r)
	}
	if c := e.nextCall(); c.req.Reason != ReasonMiss {
		t.Errorf("lookup after expiry %+v; want reason MISS", c.req)
	}
	if n := e.closeAndCountLookups(); n != 0 {
		t.Errorf("%d more lookups; want none", n)
	}
}

// A failed lookup fails the requests with its keys, without a lookup,
// until its backoff ends (1.6 s, then 2.56 s: no jitter here); the host
// is told when it ends, and the next request looks up again.
func TestFailedLookupBacksOff(t *testing.T) {
	e := newEnv(t, keyedConfig+`}`, 0.5)
	boom := errors.New("boom")
	for i, wait := range []time.Duration{1600 * time.Millisecond, 2560 * time.Millisecond} {
		if r := e.pick("a"); !r.Queue {
			t.Fatalf("failure %d: pick %+v; want queued for a lookup", i, r)
		}
		e.answer(e.nextCall(), nil, boom)
		var lerr *LookupError
		r := e.pick("a")
		if !errors.As(r.Err, &lerr) || !errors.Is(r.Err, boom) || !strings.Contains(r.Err.Error(), "boom") {
			t.Fatalf("failure %d: pick %+v; want a *LookupError with the lookup's error", i, r)
		}
		e.clock.Advance(wait - time.Millisecond)
		if r := e.pick("a"); r.Err == nil {
			t.Fatalf("failure %d: pick before the backoff ended: %+v; want the error", i, r)
		}
		e.host.mu.Lock()
		before := e.host.repicks
		e.host.mu.Unlock()
		e.clock.Advance(time.Millisecond)
		e.host.mu.Lock()
		after := e.host.repicks
		e.host.mu.Unlock()
		if after == before {
			t.Errorf("failure %d: the host was not told when the backoff ended", i)
		}
	}
	if r := e.pick("a"); !r.Queue {
		t.Errorf("pick after the second backoff: %+v; want queued", r)
	}
	e.answer(e.nextCall(), &LookupResponse{}, nil)
	if r := e.pick("a"); r.Err == nil || !strings.Contains(r.Err.Error(), "names no target") {
		t.Errorf("pick after an answer without targets: %+v; want an error saying so", r)
	}
	e.clock.Advance(backoffMax + time.Second)
	if r := e.pick("a"); !r.Queue {
		t.Fatalf("pick after the third backoff: %+v; want queued", r)
	}
	e.answer(e.nextCall(), &LookupResponse{Targets: []string{"A", ""}}, nil)
	if r := e.pick("a"); r.Err == nil || !strings.Contains(r.Err.Error(), "empty target") {
		t.Errorf("pick after an answer with an empty target: %+v; want an error saying so", r)
	}
	if got := e.host.held(); len(got) != 0 {
		t.Errorf("targets held %v; want none from unusable answers", got)
	}
	if n := e.closeAndCountLookups(); n != 0 {
		t.Errorf("%d more lookups; want none", n)
	}
}

// The default target is held from the config on, serves the requests a
// failed lookup cannot, without header data, and is released when the
// config names another.
func TestDefaultTarget(t *testing.T) {
	e := newEnv(t, keyedConfig+`, "defaultTarget": "D"}`, 0.5)
	if got := e.host.held(); len(got) != 1 || got["D"] != 1 {
		t.Fatalf("targets held %v; want the default D", got)
	}
	e.pick("a")
	e.answer(e.nextCall(), nil, errors.New("boom"))
	if r := e.pick("a"); r.Target != "D" || !r.Default || r.HeaderData != "" || r.Err != nil {
		t.Errorf("pick after a failed lookup: %+v; want the default target D", r)
	}
	if err := e.pol.Update(mustParse(t, keyedConfig+`, "defaultTarget": "E"}`)); err != nil {
		t.Fatal(err)
	}
	if got := e.host.held(); len(got) != 1 || got["E"] != 1 {
		t.Errorf("targets held %v; want the new default E alone", got)
	}
}

// With the throttle refusing every lookup after a failure (all draws 0),
// a request with new keys fails ErrThrottled, or goes to the default
// target; once the window has passed, lookups go again.
func TestThrottledLookup(t *testing.T) {
	e := newEnv(t, keyedConfig+`}`, 0)
	e.pick("a")
	e.answer(e.nextCall(), nil, errors.New("boom"))
	if r := e.pick("b"); !errors.Is(r.Err, ErrThrottled) {
		t.Errorf("pick after a failure: %+v; want ErrThrottled", r)
	}
	if err := e.pol.Update(mustParse(t, keyedConfig+`, "defaultTarget": "D"}`)); err != nil {
		t.Fatal(err)
	}
	if r := e.pick("b"); r.Target != "D" || !r.Default {
		t.Errorf("throttled pick with a default target: %+v; want D", r)
	}
	e.clock.Advance(throttleWindow + time.Second)
	if r := e.pick("b"); !r.Queue {
		t.Errorf("pick once the window passed: %+v; want queued for a lookup", r)
	}
	if c := e.nextCall(); c.req.KeyMap["k"] != "b" {
		t.Errorf("lookup %+v; want keys k=b", c.req)
	}
}

// A lookup the service answered with an error (an *AnswerError) counts as
// accepted: it fails and backs off, but the throttle lets the next keys'
// lookups go.
func TestAnswerErrorIsNotThrottled(t *testing.T) {
	e := newEnv(t, keyedConfig+`}`, 0)
	e.pick("a")
	e.answer(e.nextCall(), nil, &AnswerError{Err: errors.New("no target for a")})
	if r := e.pick("a"); r.Err == nil || !strings.Contains(r.Err.Error(), "no target for a") {
		t.Errorf("pick after an error answer: %+v; want its error", r)
	}
	if r := e.pick("b"); !r.Queue {
		t.Errorf("pick of new keys after an error answer: %+v; want queued for a lookup", r)
	}
	e.nextCall()
}

// The throttle refuses with probability (requests - 2·accepts) /
// (requests + 8) over its window.
func TestThrottleFormula(t *testing.T) {
	var th throttler
	now := time.Unix(5000, 0)
	for i := range 92 {
		if !th.allow(now, 0.95) {
			t.Fatalf("request %d refused at draw 0.95; p = %d/%d", i, i, i+8)
		}
	}
	if th.allow(now, 0.9) { // p = 92/100
		t.Error("allowed at draw 0.9 with p 0.92")
	}
	if !th.allow(now, 0.95) { // p = 93/101
		t.Error("refused at draw 0.95 with p 0.92")
	}
	for range 47 {
		th.answered(now) // 94 requests, 47 accepts: p = 0
	}
	if !th.allow(now, 0) {
		t.Error("refused with twice as many accepts as requests")
	}
	later := now.Add(throttleWindow)
	if r, a := th.sums(later); r != 0 || a != 0 {
		t.Errorf("counts a window later: %d requests, %d accepts; want none", r, a)
	}
}

// Past cache_size_bytes the least recently used entries go, and their
// targets with them; an answer younger than five seconds is kept.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	// Each entry counts len("/s/m\x00k\x00a\x00") = 9 bytes: two fit.
	e := newEnv(t, keyedConfig[:len(keyedConfig)-len(`"1000"`)]+`"20"}`, 0.5)
	e.lookUp("a", "", "A")
	e.lookUp("b", "", "B")
	e.lookUp("c", "", "C")
	if got := e.host.held(); len(got) != 3 {
		t.Fatalf("targets held %v; want A, B, C: answers younger than 5s stay", got)
	}
	e.clock.Advance(6 * time.Second)
	e.pick("a") // a the most recent: b and c go, least recent first, until d fits
	e.lookUp("d", "", "D")
	if got := e.host.held(); len(got) != 2 || got["A"] != 1 || got["D"] != 1 {
		t.Errorf("targets held %v; want A and D", got)
	}
	if r := e.pick("b"); !r.Queue {
		t.Errorf("pick of an evicted key: %+v; want queued for a lookup", r)
	}
}

// Targets are counted: two answers naming T hold it once at the host, and
// it is released with the last.
func TestTargetsCounted(t *testing.T) {
	e := newEnv(t, keyedConfig+`, "maxAge": "10s"}`, 0.5)
	e.lookUp("a", "", "T")
	e.lookUp("b", "", "T", "U")
	e.host.mu.Lock()
	adds := e.host.adds["T"]
	e.host.mu.Unlock()
	if got := e.host.held(); adds != 1 || got["T"] != 1 || got["U"] != 1 {
		t.Errorf("targets held %v after %d adds of T; want T once and U", got, adds)
	}
	// Both answers expire, and the purge drops them.
	e.clock.Advance(purgeInterval)
	if got := e.host.held(); len(got) != 0 {
		t.Errorf("targets held after the purge: %v; want none", got)
	}
}

// Of an answer's targets, the first that is not failing is taken, else
// the last.
func TestPrefersATargetNotFailing(t *testing.T) {
	e := newEnv(t, keyedConfig+`}`, 0.5)
	e.lookUp("a", "", "A", "B", "C")
	for _, tt := range []struct {
		failing []string
		want    string
	}{{nil, "A"}, {[]string{"A"}, "B"}, {[]string{"A", "B"}, "C"}, {[]string{"A", "B", "C"}, "C"}} {
		e.failing = make(map[string]bool)
		for _, f := range tt.failing {
			e.failing[f] = true
		}
		if r := e.pick("a"); r.Target != tt.want {
			t.Errorf("failing %v: target %q; want %q", tt.failing, r.Target, tt.want)
		}
	}
}

// When the lookup service's channel is ready again after a failure, every
// backoff ends at once.
func TestBackToReadyEndsBackoff(t *testing.T) {
	e := newEnv(t, keyedConfig+`}`, 0.5)
	e.pick("a")
	e.answer(e.nextCall(), nil, errors.New("boom"))
	if r := e.pick("a"); r.Err == nil {
		t.Fatalf("pick after a failure: %+v; want an error", r)
	}
	e.mu.Lock()
	backToReady := e.backToReady
	e.mu.Unlock()
	backToReady()
	if r := e.pick("a"); !r.Queue {
		t.Errorf("pick once the channel is ready again: %+v; want queued for a lookup", r)
	}
	e.nextCall()
}

// A new lookup service gets a new channel, and the old one is closed.
func TestUpdateRedials(t *testing.T) {
	e := newEnv(t, keyedConfig+`}`, 0.5)
	first := e.service()
	if err := e.pol.Update(mustParse(t, strings.Replace(keyedConfig, "rls.test:1", "rls.test:2", 1)+`}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.closed:
	default:
		t.Error("the channel to the old lookup service is open")
	}
	if s := e.service(); s == first || s.target != "rls.test:2" {
		t.Errorf("lookup service %q; want a channel to rls.test:2", s.target)
	}
	e.pick("a")
	e.nextCall() // from the new service
}

// Close cancels the lookups in flight and waits for them.
func TestCloseCancelsLookups(t *testing.T) {
	e := newEnv(t, keyedConfig+`}`, 0.5)
	e.pick("a")
	c := e.nextCall()
	e.pol.Close()
	if c.ctx.Err() == nil {
		t.Error("the lookup in flight was not cancelled")
	}
	select {
	case <-e.service().closed:
	default:
		t.Error("the channel to the lookup service is open after Close")
	}
	if r := e.pick("a"); !r.Queue {
		t.Errorf("pick after Close: %+v; want queued", r)
	}
}

// A path that is not /service/method fails, saying so.
func TestInvalidPath(t *testing.T) {
	e := newEnv(t, keyedConfig+`}`, 0.5)
	if r := e.pol.Pick(&Request{Path: "/s"}, nil); r.Err == nil || !strings.Contains(r.Err.Error(), `"/s"`) {
		t.Errorf("pick of path /s: %+v; want an error naming it", r)
	}
}

// BenchmarkPickCached: a pick served from the cache, the per-request cost
// of a route by the plugin (keys built, the entry found, a target chosen).
func BenchmarkPickCached(b *testing.B) {
	e := newEnv(b, keyedConfig+`}`, 0.5)
	e.lookUp("a", "hd", "A")
	req := &Request{Path: "/s/m", Headers: headers{"x-k": {"a"}}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if r := e.pol.Pick(req, nil); r.Target != "A" {
			b.Fatalf("pick %+v", r)
		}
	}
}

// A lookup service that cannot be dialled fails the lookups with the
// dial's error, naming the service; the Policy runs on, and a config
// that dials takes over.
func TestDialFailure(t *testing.T) {
	e := newEnv(t, keyedConfig+`}`, 0.5)
	ps := New(Options{Host: e.host, Clock: e.clock, Rand: func() float64 { return 0.5 }, Dial: func(target string, _ func()) (Lookuper, error) {
		if target == "rls.test:1" {
			return nil, errors.New("no resolver")
		}
		return e.dial(target, nil)
	}})
	defer ps.Close()
	if err := ps.Update(mustParse(t, keyedConfig+`}`)); err == nil || !strings.Contains(err.Error(), `"rls.test:1"`) || !strings.Contains(err.Error(), "no resolver") {
		t.Errorf("Update: %v; want the dial's error, naming the service", err)
	}
	pick := func() Result { return ps.Pick(&Request{Path: "/s/m", Headers: headers{"x-k": {"a"}}}, nil) }
	repicks := e.host.repickCount()
	if r := pick(); !r.Queue {
		t.Fatalf("first pick: %+v; want queued", r)
	}
	e.host.waitRepick(e.ctx, t, repicks)
	if r := pick(); !errors.As(r.Err, new(*LookupError)) || !strings.Contains(r.Err.Error(), "no resolver") {
		t.Errorf("pick after the lookup failed: %+v; want a *LookupError with the dial's error", r)
	}
	if err := ps.Update(mustParse(t, strings.Replace(keyedConfig, "rls.test:1", "rls.test:2", 1)+`}`)); err != nil {
		t.Errorf("Update to a service that dials: %v", err)
	}
}
