package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// tracker measures a client from the server's side, so that any client is
// measured the same way: when its stream opened, when it had ACKed every
// EDS resource of the tree (full config), what it sent until then, and how
// long each update took to be ACKed.
//
// An ACK is a request of the type whose response_nonce is the nonce of a
// response and which carries no error_detail (and, in SotW, the version
// of that response).
type tracker struct {
	wire *wireStats
	n    int // EDS resources in a complete tree

	mu sync.Mutex
	// Since the tracker started.
	reqs, names map[string]int64 // by type URL
	nacks       int64

	// The current stream: when it opened and what was sent on it.
	opened    time.Time
	sent      map[string]*sentResponse // by nonce
	edsACKed  map[string]bool          // delta: EDS names ACKed
	resent    int                      // resources sent on the stream
	reqTypes  map[string]bool          // types requested on the stream
	lastReqAt time.Time

	// exchanges is the first exchange of each type on the current stream,
	// recorded until full config (see timeline).
	exchanges map[string]*exchange

	// Full config, once reached.
	full     chan struct{} // closed at full config
	fullStat *resolveStats

	// The update being waited for, if any.
	wait *updateWait
}

// exchange is the first exchange of one type on a stream, as the server
// saw it: when the client first subscribed to names of the type, when the
// server sent its first response of the type, and when the client ACKed
// it; each since the stream opened, -1 until it happened.
type exchange struct {
	sub, resp, ack time.Duration
	nonce          string // of the first response
}

// sentResponse is what the tracker remembers of a response.
type sentResponse struct {
	typeURL string
	version string   // SotW
	count   int      // resources in it
	names   []string // delta EDS only
}

// resolveStats is what a client did from stream open to full config.
type resolveStats struct {
	took       time.Duration
	reqs       map[string]int64 // by type URL
	bytesIn    int64            // client → server
	bytesOut   int64            // server → client
	totalReqs  int64
	totalNames int64
}

// updateWait is one update the tracker waits to see ACKed: the response of
// typeURL with version (SotW), or carrying resource name at version (delta).
type updateWait struct {
	typeURL, version, name string
	nonce                  string    // of the response, once sent
	sentAt, ackedAt        time.Time // when the response left, and its ACK arrived
	nacked                 bool
	done                   chan struct{}
}

func newTracker(n int) *tracker {
	return &tracker{
		wire:  &wireStats{},
		n:     n,
		reqs:  make(map[string]int64),
		names: make(map[string]int64),
		full:  make(chan struct{}),
	}
}

func (t *tracker) streamOpened(bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.opened = time.Now()
	t.sent = make(map[string]*sentResponse)
	t.edsACKed = make(map[string]bool)
	t.resent = 0
	t.reqTypes = make(map[string]bool)
	t.exchanges = make(map[string]*exchange)
}

// exchangeLocked returns the first exchange of typeURL on the stream,
// nil once full config has been reached: what comes later is not part of
// the time to full config.
func (t *tracker) exchangeLocked(typeURL string) *exchange {
	if t.fullStat != nil || t.exchanges == nil {
		return nil
	}
	x := t.exchanges[typeURL]
	if x == nil {
		x = &exchange{sub: -1, resp: -1, ack: -1}
		t.exchanges[typeURL] = x
	}
	return x
}

// timeline tells, for the stream that reached full config, how each type's
// first exchange went at the server: subscribed, answered, ACKed (ms since
// the stream opened), and how long after ACKing the type above it the
// client subscribed to it. Those gaps are the client's own: a client that
// subscribes to the endpoints as soon as it has read the clusters has none
// to speak of.
func (t *tracker) timeline() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ms := func(d time.Duration) string {
		if d < 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", float64(d.Microseconds())/1000)
	}
	var b strings.Builder
	b.WriteString("timeline at the server, ms from stream open (subscribed [after the ACK above] → answered → ACKed):")
	prevAck := time.Duration(-1)
	for _, u := range typeURLs {
		x := t.exchanges[u]
		if x == nil {
			continue
		}
		fmt.Fprintf(&b, " %s %s", shortType(u), ms(x.sub))
		if prevAck >= 0 && x.sub >= 0 {
			fmt.Fprintf(&b, " [+%s]", ms(x.sub-prevAck))
		}
		fmt.Fprintf(&b, " → %s → %s;", ms(x.resp), ms(x.ack))
		prevAck = x.ack
	}
	return strings.TrimSuffix(b.String(), ";")
}

// shortType is the last part of a type URL: Cluster for the Cluster type.
func shortType(typeURL string) string {
	return typeURL[strings.LastIndexByte(typeURL, '.')+1:]
}

func (t *tracker) request(typeURL string, names int, nonce, version string, nack bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reqs[typeURL]++
	t.names[typeURL] += int64(names)
	t.reqTypes[typeURL] = true
	t.lastReqAt = now
	if x := t.exchangeLocked(typeURL); x != nil {
		switch {
		case x.sub < 0 && names > 0:
			x.sub = now.Sub(t.opened)
		case x.ack < 0 && !nack && nonce != "" && nonce == x.nonce:
			x.ack = now.Sub(t.opened)
		}
	}
	if nack {
		t.nacks++
	}
	if w := t.wait; w != nil && w.nonce != "" && w.nonce == nonce && w.typeURL == typeURL && w.ackedAt.IsZero() {
		w.ackedAt, w.nacked = now, nack
		close(w.done)
		t.wait = nil
	}
	sr := t.sent[nonce]
	if nack || sr == nil || sr.typeURL != typeURL || typeURL != edsURL || t.fullStat != nil {
		return
	}
	complete := false
	if sr.names == nil { // SotW: the response holds every EDS resource requested
		complete = sr.count == t.n && version == sr.version
	} else {
		for _, name := range sr.names {
			t.edsACKed[name] = true
		}
		complete = len(t.edsACKed) == t.n
	}
	if complete {
		t.reachedFullLocked(now)
	}
}

func (t *tracker) reachedFullLocked(now time.Time) {
	t.fullStat = t.statsLocked(now)
	close(t.full)
}

// statsSoFar returns what the client has sent since its stream opened,
// for a client that has not reached full config.
func (t *tracker) statsSoFar() *resolveStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.statsLocked(time.Now())
}

func (t *tracker) statsLocked(now time.Time) *resolveStats {
	st := &resolveStats{
		took:     now.Sub(t.opened),
		reqs:     make(map[string]int64),
		bytesIn:  t.wire.in.Load(),
		bytesOut: t.wire.out.Load(),
	}
	for typeURL, n := range t.reqs {
		st.reqs[typeURL] = n
		st.totalReqs += n
	}
	for _, n := range t.names {
		st.totalNames += n
	}
	return st
}

func (t *tracker) sotwResponse(resp *discoveryv3.DiscoveryResponse) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.resent += len(resp.GetResources())
	t.sent[resp.GetNonce()] = &sentResponse{typeURL: resp.GetTypeUrl(), version: resp.GetVersionInfo(), count: len(resp.GetResources())}
	t.firstResponseLocked(resp.GetTypeUrl(), resp.GetNonce(), now)
	if w := t.wait; w != nil && w.nonce == "" && w.typeURL == resp.GetTypeUrl() && w.version == resp.GetVersionInfo() {
		w.nonce, w.sentAt = resp.GetNonce(), now
	}
}

func (t *tracker) deltaResponse(resp *discoveryv3.DeltaDiscoveryResponse) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.resent += len(resp.GetResources())
	sr := &sentResponse{typeURL: resp.GetTypeUrl(), count: len(resp.GetResources())}
	t.firstResponseLocked(resp.GetTypeUrl(), resp.GetNonce(), now)
	w := t.wait
	if w != nil && (w.nonce != "" || w.typeURL != resp.GetTypeUrl()) {
		w = nil
	}
	for _, r := range resp.GetResources() {
		if sr.typeURL == edsURL && t.fullStat == nil {
			sr.names = append(sr.names, r.GetName())
		}
		if w != nil && r.GetName() == w.name && r.GetVersion() == w.version {
			w.nonce, w.sentAt = resp.GetNonce(), now
		}
	}
	if sr.typeURL == edsURL && sr.names == nil {
		sr.names = []string{}
	}
	t.sent[resp.GetNonce()] = sr
}

// firstResponseLocked records a response of typeURL if it is the type's
// first on the stream.
func (t *tracker) firstResponseLocked(typeURL, nonce string, now time.Time) {
	if x := t.exchangeLocked(typeURL); x != nil && x.resp < 0 {
		x.resp, x.nonce = now.Sub(t.opened), nonce
	}
}

// expect starts waiting for an update; call it before the update is made.
func (t *tracker) expect(typeURL, version, name string) *updateWait {
	w := &updateWait{typeURL: typeURL, version: version, name: name, done: make(chan struct{})}
	t.mu.Lock()
	t.wait = w
	t.mu.Unlock()
	return w
}

// fullStats returns the resolve statistics, nil before full config.
func (t *tracker) fullStats() *resolveStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fullStat
}

func (t *tracker) nackCount() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nacks
}

// streamState reports, for the current stream, when it opened, how many
// types have been requested on it, how many resources were sent on it, and
// when the last request came.
func (t *tracker) streamState() (opened time.Time, types, resent int, lastReq time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.opened, len(t.reqTypes), t.resent, t.lastReqAt
}
