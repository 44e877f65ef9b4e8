package httpxds

import (
	"errors"
	"io"
	"sync"
)

// errBodyReplaced is what an attempt reading a request body gets once a
// later attempt has taken the body over.
var errBodyReplaced = errors.New("httpxds: request body taken over by a later attempt")

// errBodyLost is what an attempt replaying a body gets when an earlier
// attempt, still reading when the retry began, ran the body past the
// buffer's bound: the bytes it read are gone.
var errBodyLost = errors.New("httpxds: request body past the retry buffer's bound, cannot be replayed")

// replayBody is the body of a request that may be retried but whose
// GetBody cannot give it again: the attempts read the request's body in
// turn through it, and every byte read is kept (up to limit) so that the
// next attempt reads it again before going on with the rest. Past limit,
// what was kept is dropped and the attempt reading is the request's last
// (Envoy abandons its retries when the body outgrows its buffer). Only
// the latest attempt reads: an earlier one, which its transport may still
// be writing when the retry begins, gets errBodyReplaced.
//
// The request's body is closed once, when the last attempt's is closed
// (or at finish if that happened first): a transport closes each
// attempt's body, and a retry needs the request's body open.
type replayBody struct {
	limit int64 // bytes kept at most

	// readMu serializes reading src, never held with mu while waiting
	// on it: Close must not wait for a Read blocked on src (a pipe).
	readMu sync.Mutex
	src    io.ReadCloser

	mu        sync.Mutex
	buf       []byte         // what the attempts read of src, unless overflow
	read      int64          // bytes read of src
	overflow  bool           // src ran past limit: buf is dropped
	srcErr    error          // src's last error (io.EOF at its end)
	cur       *attemptReader // the attempt that reads
	done      bool           // no attempt will follow
	srcClosed bool
}

// attemptReader is one attempt's view of a replayBody.
type attemptReader struct {
	rb     *replayBody
	pos    int64 // bytes of the body given so far
	closed bool
}

// attempt returns the body of the next attempt, which the earlier ones'
// can no longer read.
func (rb *replayBody) attempt() io.ReadCloser {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.cur = &attemptReader{rb: rb}
	return rb.cur
}

// getBody is the attempt request's GetBody, which net/http's transport
// calls to send the request again on a new connection itself.
func (rb *replayBody) getBody() (io.ReadCloser, error) {
	if !rb.replayable() {
		return nil, errBodyLost
	}
	return rb.attempt(), nil
}

// replayable reports whether every byte read of the body so far is kept.
func (rb *replayBody) replayable() bool {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return !rb.overflow
}

// finish says no attempt follows: the request's body is closed now if
// the last attempt's already is, else when it is.
func (rb *replayBody) finish() {
	rb.mu.Lock()
	rb.done = true
	closeSrc := (rb.cur == nil || rb.cur.closed) && !rb.srcClosed
	rb.srcClosed = rb.srcClosed || closeSrc
	rb.mu.Unlock()
	if closeSrc {
		_ = rb.src.Close()
	}
}

func (a *attemptReader) Read(p []byte) (int, error) {
	rb := a.rb
	if n, err, ok := a.fromBuf(p); ok {
		return n, err
	}
	rb.readMu.Lock()
	defer rb.readMu.Unlock()
	// Another attempt may have read on while this one waited.
	if n, err, ok := a.fromBuf(p); ok {
		return n, err
	}
	n, err := rb.src.Read(p)
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.read += int64(n)
	a.pos += int64(n)
	switch {
	case rb.overflow:
	case rb.read > rb.limit:
		rb.overflow, rb.buf = true, nil
	default:
		rb.buf = append(rb.buf, p[:n]...)
	}
	if err != nil {
		rb.srcErr = err
	}
	return n, err
}

// fromBuf gives the next bytes of buf, or what ends the read: false when
// the attempt must read src.
func (a *attemptReader) fromBuf(p []byte) (int, error, bool) {
	rb := a.rb
	rb.mu.Lock()
	defer rb.mu.Unlock()
	switch {
	case a.closed || a != rb.cur:
		return 0, errBodyReplaced, true
	case rb.overflow:
		if a.pos != rb.read {
			return 0, errBodyLost, true
		}
	case a.pos < int64(len(rb.buf)):
		n := copy(p, rb.buf[a.pos:])
		a.pos += int64(n)
		return n, nil, true
	}
	if rb.srcErr != nil {
		return 0, rb.srcErr, true
	}
	return 0, nil, false
}

func (a *attemptReader) Close() error {
	rb := a.rb
	rb.mu.Lock()
	a.closed = true
	closeSrc := rb.done && a == rb.cur && !rb.srcClosed
	rb.srcClosed = rb.srcClosed || closeSrc
	rb.mu.Unlock()
	if closeSrc {
		return rb.src.Close()
	}
	return nil
}
