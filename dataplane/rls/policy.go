package rls

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/goxds/xds/dataplane/lbpolicy"
)

// purgeInterval is how often entries that expired are dropped (and their
// targets released).
const purgeInterval = time.Minute

// Policy is the route lookup of one cluster specifier plugin: it picks a
// target for each request by the lookup service's answer for the
// request's keys, caching answers and backing off failures. Its methods
// are safe for concurrent use.
type Policy struct {
	// Read-only after New.
	host       Host
	dial       Dialer
	targetType string
	clock      Clock
	rand       func() float64
	// ctx is cancelled by Close, ending the lookups in flight; wg counts
	// their goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	cfg    *Config // nil before Update
	// lookuper is the channel to cfg's lookup service; dialErr why there
	// is none.
	lookuper Lookuper
	dialErr  error
	throttle throttler
	cache    cache
	// pending are the lookups in flight, by cache key: the failures in a
	// row before each.
	pending map[string]int
	// targets are the targets in use, by name: those of the entries'
	// answers and the default one.
	targets       map[string]*target
	defaultTarget *target
	purge         Timer
	hostCalls
}

// hostCalls are the Host calls the changes made under a Policy's mu need,
// made once it is released (unlockAndTell): the Host is the adapter's
// code, and runs under no lock of ours.
type hostCalls struct {
	adds     []*target
	releases []func()
	repick   bool
}

// target is one target in use, counted.
type target struct {
	name string
	refs int
	// release is the host's, once AddTarget returned; dropped is set
	// when the last reference went before that, for the adder to
	// release it.
	release func()
	dropped bool
}

// New returns a Policy that waits for its first config (Update).
func New(opts Options) *Policy {
	p := &Policy{host: opts.Host, dial: opts.Dial, targetType: opts.TargetType, clock: opts.Clock, rand: opts.Rand}
	if p.targetType == "" {
		p.targetType = "grpc"
	}
	if p.clock == nil {
		p.clock = lbpolicy.RealClock{}
	}
	if p.rand == nil {
		p.rand = rand.Float64
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// Update applies a config: a new lookup service gets a new channel (and a
// new throttle: it is another service), a new cache size evicts what no
// longer fits, a new default target is acquired. The cache is kept. The
// error is the dial's: lookups fail with it until a config dials.
func (p *Policy) Update(cfg *Config) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	old := p.cfg
	redial := old == nil || old.LookupService != cfg.LookupService
	p.mu.Unlock()

	var lk Lookuper
	var err error
	if redial {
		// Outside mu: the adapter's code.
		lk, err = p.dial(cfg.LookupService, p.resetBackoff)
	}

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		if lk != nil {
			lk.Close()
		}
		return nil
	}
	var stale Lookuper
	if redial {
		stale = p.lookuper
		p.lookuper, p.dialErr, p.throttle = lk, err, throttler{}
		if err != nil {
			err = fmt.Errorf("rls: lookup service %q: %w", cfg.LookupService, err)
			p.dialErr = err
		}
	}
	p.cfg = cfg
	p.cache.max = cfg.CacheSizeBytes
	p.evictLocked(p.cache.overflow(p.clock.Now()))
	if p.defaultTarget == nil || p.defaultTarget.name != cfg.DefaultTarget {
		if p.defaultTarget != nil {
			p.releaseLocked(p.defaultTarget)
			p.defaultTarget = nil
		}
		if cfg.DefaultTarget != "" {
			p.defaultTarget = p.acquireLocked(cfg.DefaultTarget)
		}
	}
	if p.purge == nil {
		p.purge = p.clock.AfterFunc(purgeInterval, p.purgeExpired)
	}
	p.repick = true
	p.unlockAndTell()
	if stale != nil {
		stale.Close()
	}
	return err
}

// Pick chooses where req goes. failing reports whether a target is
// failing (gRPC: its cluster is in TRANSIENT_FAILURE), for an answer
// with several targets: the first that is not is taken, else the last.
// failing is called under the Policy's lock, so it must not call the
// Policy.
func (p *Policy) Pick(req *Request, failing func(target string) bool) Result {
	if !validPath(req.Path) {
		return Result{Err: fmt.Errorf("rls: path %q is not of the form /service/method", req.Path)}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.cfg == nil {
		return Result{Queue: true}
	}
	keys, key := p.cfg.Keys.Keys(req)
	e := p.cache.get(key)
	_, inFlight := p.pending[key]
	now := p.clock.Now()
	switch {
	case e != nil && e.hasData(now):
		if !inFlight && !now.Before(e.stale) && !e.backingOff(now) {
			// Refresh in the background; the answer serves meanwhile,
			// so a throttled refresh changes nothing.
			p.lookupLocked(key, keys, ReasonStale, e.headerData, e.retries)
		}
		return p.fromAnswer(e, failing)
	case inFlight:
		return Result{Queue: true}
	case e != nil && e.backingOff(now):
		return p.fallback(&LookupError{Err: e.err})
	}
	retries := 0
	if e != nil {
		retries = e.retries
	}
	if !p.lookupLocked(key, keys, ReasonMiss, "", retries) {
		return p.fallback(ErrThrottled)
	}
	return Result{Queue: true}
}

// fromAnswer picks among the targets of e's answer.
func (p *Policy) fromAnswer(e *entry, failing func(string) bool) Result {
	t := e.targets[len(e.targets)-1]
	for _, c := range e.targets[:len(e.targets)-1] {
		if failing == nil || !failing(c.name) {
			t = c
			break
		}
	}
	return Result{Target: t.name, HeaderData: e.headerData}
}

// fallback sends a request with no answer at hand to the default target,
// or fails it with err.
func (p *Policy) fallback(err error) Result {
	if p.defaultTarget == nil {
		return Result{Err: err}
	}
	return Result{Target: p.defaultTarget.name, Default: true}
}

// lookupLocked starts a lookup for key unless the throttle refuses it.
func (p *Policy) lookupLocked(key string, keys map[string]string, reason Reason, staleHeaderData string, retries int) bool {
	if !p.throttle.allow(p.clock.Now(), p.rand()) {
		return false
	}
	if p.pending == nil {
		p.pending = make(map[string]int)
	}
	p.pending[key] = retries
	req := &LookupRequest{TargetType: p.targetType, KeyMap: keys, Reason: reason, StaleHeaderData: staleHeaderData}
	lk, dialErr, timeout := p.lookuper, p.dialErr, p.cfg.LookupServiceTimeout
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		var resp *LookupResponse
		err := dialErr
		if lk != nil {
			ctx, cancel := context.WithTimeout(p.ctx, timeout)
			resp, err = lk.Lookup(ctx, req)
			cancel()
		}
		p.answer(key, resp, err)
	}()
	return true
}

// answer records the outcome of the lookup of key.
func (p *Policy) answer(key string, resp *LookupResponse, err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	retries := p.pending[key]
	delete(p.pending, key)
	now := p.clock.Now()
	if err == nil || errors.As(err, new(*AnswerError)) {
		p.throttle.answered(now)
	}
	if err == nil {
		err = checkAnswer(resp)
	}
	e := p.cache.get(key)
	if e == nil {
		e = &entry{key: key}
		p.cache.add(e)
	}
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	if err != nil {
		// The answer in force, if any, serves until it expires.
		e.err, e.retries = err, retries+1
		d := backoff(e.retries, p.rand())
		e.backoffUntil, e.backoffExpiry = now.Add(d), now.Add(2*d)
		e.timer = p.clock.AfterFunc(d, p.backoffEnded)
	} else {
		p.setTargetsLocked(e, resp.Targets)
		e.headerData = resp.HeaderData
		e.expiry, e.stale, e.evictableAfter = now.Add(p.cfg.MaxAge), now.Add(p.cfg.StaleAge), now.Add(minEvictAge)
		e.err, e.retries, e.backoffUntil, e.backoffExpiry = nil, 0, time.Time{}, time.Time{}
		p.cache.resized(e)
	}
	if e.size > p.cache.max {
		// It can never fit: requests with these keys look up each time.
		p.evictLocked([]*entry{e})
	}
	p.evictLocked(p.cache.overflow(now))
	p.repick = true
	p.unlockAndTell()
}

// checkAnswer says what makes an answer unusable: no target, or an empty
// one (gRPC would fail the requests sent to it).
func checkAnswer(resp *LookupResponse) error {
	if resp == nil || len(resp.Targets) == 0 {
		return errors.New("the answer names no target")
	}
	if slices.Contains(resp.Targets, "") {
		return fmt.Errorf("the answer names an empty target (targets %q)", resp.Targets)
	}
	return nil
}

// setTargetsLocked gives e the targets of an answer, keeping the
// references it holds already when they are the same.
func (p *Policy) setTargetsLocked(e *entry, names []string) {
	same := len(names) == len(e.targets)
	for i := 0; same && i < len(names); i++ {
		same = names[i] == e.targets[i].name
	}
	if same {
		return
	}
	old := e.targets
	e.targets = make([]*target, len(names))
	for i, name := range names {
		e.targets[i] = p.acquireLocked(name)
	}
	for _, t := range old {
		p.releaseLocked(t)
	}
}

// evictLocked drops entries, their targets and timers.
func (p *Policy) evictLocked(es []*entry) {
	for _, e := range es {
		if p.cache.m[e.key] != e {
			continue
		}
		p.cache.remove(e)
		if e.timer != nil {
			e.timer.Stop()
		}
		for _, t := range e.targets {
			p.releaseLocked(t)
		}
		e.targets = nil
	}
}

// purgeExpired drops the entries that expired, every purgeInterval.
func (p *Policy) purgeExpired() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	if es := p.cache.expired(p.clock.Now()); len(es) > 0 {
		p.evictLocked(es)
		p.repick = true
	}
	p.purge = p.clock.AfterFunc(purgeInterval, p.purgeExpired)
	p.unlockAndTell()
}

// backoffEnded repicks when an entry's backoff ends: a request that
// waits is looked up again.
func (p *Policy) backoffEnded() {
	p.mu.Lock()
	p.repick = !p.closed
	p.unlockAndTell()
}

// resetBackoff ends every backoff: the lookup service's channel is ready
// again after a failure.
func (p *Policy) resetBackoff() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	for _, e := range p.cache.m {
		if e.timer != nil {
			e.timer.Stop()
			e.timer = nil
		}
		if e.retries > 0 || !e.backoffUntil.IsZero() {
			e.retries, e.backoffUntil, e.backoffExpiry = 0, time.Time{}, time.Time{}
			p.repick = true
		}
	}
	p.unlockAndTell()
}

// acquireLocked takes a reference to target name.
func (p *Policy) acquireLocked(name string) *target {
	t := p.targets[name]
	if t == nil {
		if p.targets == nil {
			p.targets = make(map[string]*target)
		}
		t = &target{name: name}
		p.targets[name] = t
		p.adds = append(p.adds, t)
	}
	t.refs++
	return t
}

// releaseLocked drops a reference to t; the last one releases it at the
// host.
func (p *Policy) releaseLocked(t *target) {
	t.refs--
	if t.refs > 0 {
		return
	}
	delete(p.targets, t.name)
	if t.release != nil {
		p.releases = append(p.releases, t.release)
		t.release = nil
	} else {
		t.dropped = true
	}
}

// unlockAndTell releases mu, then makes the host calls recorded under it:
// releases, adds, and a repick last, when the targets are in place.
func (p *Policy) unlockAndTell() {
	adds, releases, repick := p.adds, p.releases, p.repick
	p.adds, p.releases, p.repick = nil, nil, false
	p.mu.Unlock()
	for _, release := range releases {
		release()
	}
	for _, t := range adds {
		release := p.host.AddTarget(t.name)
		p.mu.Lock()
		keep := !t.dropped
		if keep {
			t.release = release
		}
		p.mu.Unlock()
		if !keep {
			release()
		}
	}
	if repick {
		p.host.Repick()
	}
}

// Close stops the Policy: lookups in flight are cancelled and waited
// for, timers stopped, every target released and the channel closed.
func (p *Policy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.cancel()
	if p.purge != nil {
		p.purge.Stop()
	}
	for _, e := range p.cache.m {
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	for _, t := range p.targets {
		t.refs = 1
		p.releaseLocked(t)
	}
	p.cache, p.pending, p.defaultTarget = cache{}, nil, nil
	lk := p.lookuper
	p.lookuper = nil
	p.repick = false
	p.unlockAndTell()
	if lk != nil {
		lk.Close()
	}
	p.wg.Wait()
}
