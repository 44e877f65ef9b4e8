package transport

import (
	"sort"
	"time"

	"google.golang.org/grpc/backoff"
)

// typeState is the wire state of one resource type on one transport: the
// logical sub-stream of that type. It is guarded by the runner's mutex.
type typeState struct {
	typeURL string
	// names is every name the client wants, "*" included when wildcard.
	names map[string]struct{}

	// version is the last version_info accepted (SotW). It survives stream
	// restarts: the first request on a new stream carries it.
	version string
	// nonce is the nonce of the latest response of this type on the
	// current stream (SotW). Nonces do not survive a stream restart.
	nonce string
	// sentOnStream tells whether any request of this type has gone out on
	// the current stream. Until one has, an empty SotW name list would mean
	// "wildcard" to the server, so none is sent.
	sentOnStream bool
	// subsChanged marks subscriptions changed since the last request.
	subsChanged bool

	// pendingSub and pendingUnsub are the delta subscription changes not yet
	// sent on the current stream.
	pendingSub, pendingUnsub map[string]struct{}
	// initialVersions is sent once, in the first delta request of this type
	// on a new stream; nil afterwards.
	initialVersions map[string]string

	// reply is the ACK or NACK owed for the latest response.
	reply *reply

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
	}
}

// updateLocked applies a subscription change to the wanted set and to the
// delta bookkeeping. A name added and removed before the change reached the
// server cancels out.
func (ts *typeState) updateLocked(add, remove []string) {
	for _, n := range add {
		if _, ok := ts.names[n]; ok {
			continue
		}
		ts.names[n] = struct{}{}
		ts.subsChanged = true
		if _, ok := ts.pendingUnsub[n]; ok {
			delete(ts.pendingUnsub, n)
		} else {
			ts.pendingSub[n] = struct{}{}
		}
	}
	for _, n := range remove {
		if _, ok := ts.names[n]; !ok {
			continue
		}
		delete(ts.names, n)
		ts.subsChanged = true
		if _, ok := ts.pendingSub[n]; ok {
			delete(ts.pendingSub, n)
		} else {
			ts.pendingUnsub[n] = struct{}{}
		}
	}
}

// resetForStreamLocked prepares the state for a new stream: nonces and what
// the old stream was told are forgotten; every wanted name is to be sent.
func (ts *typeState) resetForStreamLocked(initialVersions map[string]string) {
	ts.nonce = ""
	ts.sentOnStream = false
	ts.subsChanged = len(ts.names) > 0
	clear(ts.pendingUnsub)
	clear(ts.pendingSub)
	for n := range ts.names {
		ts.pendingSub[n] = struct{}{}
	}
	ts.initialVersions = initialVersions
	if ts.reply != nil {
		// A reply owed on the old stream can no longer be sent.
		close(ts.reply.sent)
		ts.reply = nil
	}
}

// takeReplyLocked detaches the owed reply, if any.
func (ts *typeState) takeReplyLocked() *reply {
	r := ts.reply
	ts.reply = nil
	return r
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
