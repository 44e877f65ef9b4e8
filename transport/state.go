package transport

import (
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"sort"
	"time"

	"google.golang.org/grpc/backoff"
)

// typeState is the wire state of one resource type on one transport: the
// logical sub-stream of that type. It is guarded by the runner's mutex.
type typeState struct {
	typeURL string
	// names is every name the client wants, "*" included when wildcard,
	// and every subscription key with dynamic parameters, with the
	// implicit key of its name (see locators.go).
	names map[string]struct{}
	// params counts, per name, the parameterised keys wanted (in names or
	// resubscribe); nil until the type has one. The implicit key of a name
	// is wanted while its count is above zero.
	params map[string]int
	// sorted is names, sorted, as the last SotW request carried them (see
	// sortedNamesLocked). It may be stale; it is never modified in place.
	sorted []string

	// version is the last version_info accepted (SotW). It survives stream
	// restarts: the first request on a new stream carries it.
	version string
	// nonce is the nonce of the latest response of this type on the
	// current stream (SotW). Nonces do not survive a stream restart.
	nonce string
	// sentOnStream tells whether any request of this type has gone out on
	// the current stream. Until one has, an empty SotW name list (or a delta
	// request subscribing nothing) would mean "wildcard" to the server, so
	// none is sent unless the wildcard is what is wanted.
	sentOnStream bool
	// namedOnStream tells whether a request of this type on the current
	// stream has named a resource ("*" included). Until one has, a server
	// that received a request reads the type as the legacy wildcard (see
	// wildcard.go).
	namedOnStream bool
	// lastWire and lastLocators are the resource_names and
	// resource_locators of the last SotW request of this type on the
	// current stream: a reply sent apart from a subscription change repeats
	// them (see sotwProtocol.request). Never modified in place.
	lastWire     []string
	lastLocators []*discoveryv3.ResourceLocator
	// subsChanged marks subscriptions changed since the last request.
	subsChanged bool
	// judging is set while a response of this type is with the handler and
	// its verdict not yet recorded (SotW): no request of the type goes out
	// meanwhile. One would carry the previous nonce, and a server that has
	// sent a newer response ignores such a request (go-control-plane does),
	// subscription change included. The client may have applied the newer
	// response by then and acted on the change (forgotten what it removed):
	// the server would go on believing the client holds it. Held, the
	// change goes out with the new nonce: right after an ACK, in a NACK
	// (see sotwProtocol.request).
	judging bool

	// pendingSub and pendingUnsub are the subscription changes not yet sent
	// on the current stream.
	pendingSub, pendingUnsub map[string]struct{}
	// resubscribe holds names wanted again while their removal has not
	// reached the server. They are held back until the request carrying the
	// removal is on its way, then go out in the next one: cancelled out, the
	// removal and the new subscription would leave the server believing the
	// client still holds a resource the client has forgotten, and it would
	// never send it again.
	resubscribe map[string]struct{}
	// initialVersions is sent once, in the first delta request of this type
	// on a new stream; nil afterwards.
	initialVersions map[string]string

	// reply is the ACK or NACK owed for the latest response, and replyDue
	// the time it may go out: zero for at once, later while a repeated NACK
	// is held (see nackDelayLocked). Only the latest response's reply is
	// owed: a newer response of the type replaces a held one, which is then
	// never sent.
	reply    *reply
	replyDue time.Time

	// lastNACK and nackRepeats spot a server resending a response the
	// client rejected, so the identical NACKs can be paced (see
	// Options.NACKBackoff). They survive stream restarts.
	lastNACK    string
	nackRepeats int
}

// nackDelayLocked records a verdict on a response of this type and returns
// how long to hold its reply: zero, unless it repeats the previous NACK for
// the same version, in which case the hold grows with each repeat.
func (ts *typeState) nackDelayLocked(cfg backoff.Config, version string, verdict error) time.Duration {
	if verdict == nil {
		ts.lastNACK, ts.nackRepeats = "", 0
		return 0
	}
	key := version + "\x00" + verdict.Error()
	if key != ts.lastNACK {
		ts.lastNACK, ts.nackRepeats = key, 0
		return 0
	}
	ts.nackRepeats++
	return backoffDelay(cfg, ts.nackRepeats)
}

// reply is an ACK (err == nil) or NACK owed to the server for a response.
type reply struct {
	nonce string
	err   error
	// sent is closed once the request carrying the reply has been written
	// to the stream, or once it can never be.
	sent chan struct{}
}

func newTypeState(typeURL string) *typeState {
	return &typeState{
		typeURL:      typeURL,
		names:        make(map[string]struct{}),
		pendingSub:   make(map[string]struct{}),
		pendingUnsub: make(map[string]struct{}),
		resubscribe:  make(map[string]struct{}),
	}
}

// updateLocked applies a subscription change to the wanted set and to the
// bookkeeping of what the server has been told. Removals come first: a name
// in both lists is removed, then wanted again. A name added and removed
// before the addition reached the server cancels out; a name removed and
// added again before the removal did is held back (see resubscribe).
func (ts *typeState) updateLocked(add, remove []string) {
	if len(add) > 64 && len(add) >= len(ts.names) {
		// A whole tree's names at once (10,000 clusters from one route
		// configuration): sized once, the sets do not grow by doubling,
		// each step leaving the last table behind.
		ts.names = withRoom(ts.names, len(add))
		ts.pendingSub = withRoom(ts.pendingSub, len(add))
	}
	for _, n := range remove {
		if name, ok := paramKey(n); ok && ts.wantedLocked(n) {
			ts.removeLocked(n)
			// The last parameterised key of a name lets its plain name go
			// (see locators.go).
			if ts.params[name]--; ts.params[name] <= 0 {
				delete(ts.params, name)
				ts.removeLocked(implicitKey(name))
			}
			continue
		}
		ts.removeLocked(n)
	}
	for _, n := range add {
		if name, ok := paramKey(n); ok && !ts.wantedLocked(n) {
			if ts.params == nil {
				ts.params = make(map[string]int)
			}
			if ts.params[name]++; ts.params[name] == 1 {
				ts.addLocked(implicitKey(name))
			}
		}
		ts.addLocked(n)
	}
}

// wantedLocked tells whether key is wanted: subscribed, or held back to be
// subscribed again.
func (ts *typeState) wantedLocked(key string) bool {
	if _, ok := ts.names[key]; ok {
		return true
	}
	_, ok := ts.resubscribe[key]
	return ok
}

func (ts *typeState) removeLocked(n string) {
	if _, ok := ts.resubscribe[n]; ok {
		delete(ts.resubscribe, n)
		return
	}
	if _, ok := ts.names[n]; !ok {
		return
	}
	delete(ts.names, n)
	ts.subsChanged = true
	if _, ok := ts.pendingSub[n]; ok {
		delete(ts.pendingSub, n)
	} else {
		ts.pendingUnsub[n] = struct{}{}
	}
}

func (ts *typeState) addLocked(n string) {
	if _, ok := ts.names[n]; ok {
		return
	}
	if _, ok := ts.pendingUnsub[n]; ok {
		ts.resubscribe[n] = struct{}{}
		return
	}
	ts.names[n] = struct{}{}
	ts.subsChanged = true
	ts.pendingSub[n] = struct{}{}
}

// sentLocked records that a request carrying every pending change of ts is
// built and about to be sent: the names held back in resubscribe can go in
// the next request, for which it sets subsChanged.
func (ts *typeState) sentLocked() {
	ts.pendingSub = emptied(ts.pendingSub)
	ts.pendingUnsub = emptied(ts.pendingUnsub)
	ts.subsChanged = false
	ts.sentOnStream = true
	for n := range ts.resubscribe {
		ts.names[n] = struct{}{}
		ts.pendingSub[n] = struct{}{}
		ts.subsChanged = true
	}
	clear(ts.resubscribe)
}

// resetForStreamLocked prepares the state for a new stream: nonces and what
// the old stream was told are forgotten; every wanted name is to be sent.
func (ts *typeState) resetForStreamLocked(initialVersions map[string]string) {
	ts.nonce = ""
	ts.sentOnStream = false
	ts.lastWire, ts.lastLocators = nil, nil
	ts.namedOnStream = false
	for n := range ts.resubscribe { // the new stream starts afresh
		ts.names[n] = struct{}{}
	}
	clear(ts.resubscribe)
	ts.subsChanged = len(ts.names) > 0
	ts.pendingUnsub = emptied(ts.pendingUnsub)
	clear(ts.pendingSub) // filled again at once
	for n := range ts.names {
		ts.pendingSub[n] = struct{}{}
	}
	ts.initialVersions = initialVersions
	ts.judging = false
	if ts.reply != nil {
		// A reply owed on the old stream can no longer be sent.
		close(ts.reply.sent)
		ts.reply, ts.replyDue = nil, time.Time{}
	}
}

// oweReplyLocked makes rep the reply owed for the latest response, to go
// out at due (zero: at once). A reply still owed for an earlier response is
// dropped: the new one answers with the latest nonce, and a held NACK of a
// response the server has since replaced is of no use to it.
func (ts *typeState) oweReplyLocked(rep *reply, due time.Time) {
	if ts.reply != nil {
		close(ts.reply.sent)
	}
	ts.reply, ts.replyDue = rep, due
}

// takeReplyLocked detaches the owed reply if it is due at now, or if force
// is set: a request of the type is going out anyway (a subscription change),
// and one without the NACK would read as an ACK of what the NACK rejects.
func (ts *typeState) takeReplyLocked(now time.Time, force bool) *reply {
	if ts.reply == nil || (!force && now.Before(ts.replyDue)) {
		return nil
	}
	r := ts.reply
	ts.reply, ts.replyDue = nil, time.Time{}
	return r
}

// heldUntilLocked returns when the held reply of ts is due, if one is. None
// is while a response is judged: no request goes out then (see judging),
// and the verdict replaces the held reply and wakes the sender.
func (ts *typeState) heldUntilLocked() (time.Time, bool) {
	return ts.replyDue, ts.reply != nil && !ts.replyDue.IsZero() && !ts.judging
}

// sortedNamesLocked returns names, sorted. SotW repeats every name in
// every request, ACKs included, so the sorted list is kept between requests
// rather than sorted anew for each response: for 10,000 names the sort
// costs more than the client's whole handling of an unchanged response. The
// kept list is used when it has as many names as names and each of them
// is in names, a check far cheaper than the sort; it is replaced, never
// modified, so requests already built keep theirs.
func (ts *typeState) sortedNamesLocked() []string {
	if len(ts.sorted) > 0 && len(ts.sorted) == len(ts.names) {
		current := true
		for _, n := range ts.sorted {
			if _, ok := ts.names[n]; !ok {
				current = false
				break
			}
		}
		if current {
			return ts.sorted
		}
	}
	ts.sorted = sortedKeys(ts.names)
	return ts.sorted
}

// withRoom returns m, or a copy of it with room for n more keys.
func withRoom(m map[string]struct{}, n int) map[string]struct{} {
	out := make(map[string]struct{}, len(m)+n)
	for k := range m {
		out[k] = struct{}{}
	}
	return out
}

// emptied returns m empty: cleared if small, a new map if not. A cleared
// map keeps its table, and the pending changes of a type are large only
// when a whole tree's names go out at once: kept, that table would be a
// second copy of the subscription set's size for the rest of the run.
func emptied(m map[string]struct{}) map[string]struct{} {
	if len(m) > 64 {
		return make(map[string]struct{})
	}
	clear(m)
	return m
}

func sortedKeys(m map[string]struct{}) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
