package xdsdebug

import (
	"time"

	"github.com/goxds/xds/watchers"
)

// trackedTree is one config tree the page shows: the latest events its
// TreeWatcher was given. Its fields after w are guarded by Handler.mu.
type trackedTree struct {
	id   int    // in the page's links; unique within the Handler
	name string // as given to Track
	w    watchers.TreeWatcher

	snap      *watchers.Snapshot // the latest, nil before the first or after a ResourceError
	snapAt    time.Time
	updates   int
	resErr    error // the ResourceError since the latest Update, if any
	resErrAt  time.Time
	ambErr    error // the latest AmbientError
	ambErrAt  time.Time
	untracked bool
}

// recorder is the TreeWatcher Track returns: it notes each event for the
// page, then passes it on. The note is taken under Handler.mu, and the
// user's watcher is called after it is released.
type recorder struct {
	h *Handler
	t *trackedTree
}

func (r recorder) Update(s *watchers.Snapshot) {
	r.h.mu.Lock()
	r.t.snap, r.t.snapAt, r.t.resErr = s, r.h.now(), nil
	r.t.updates++
	r.h.mu.Unlock()
	if r.t.w != nil {
		r.t.w.Update(s)
	}
}

func (r recorder) ResourceError(err error) {
	r.h.mu.Lock()
	r.t.snap, r.t.resErr, r.t.resErrAt = nil, err, r.h.now()
	r.h.mu.Unlock()
	if r.t.w != nil {
		r.t.w.ResourceError(err)
	}
}

func (r recorder) AmbientError(err error) {
	r.h.mu.Lock()
	r.t.ambErr, r.t.ambErrAt = err, r.h.now()
	r.h.mu.Unlock()
	if r.t.w != nil {
		r.t.w.AmbientError(err)
	}
}

// Track returns a TreeWatcher that shows on the page, under name, every
// event of the config tree it is given to, and passes each on to w (nil:
// to nobody). Give it to watchers.WatchConfigTree in place of w:
//
//	tw, untrack := h.Track("my-service", myWatcher)
//	defer untrack()
//	cancel := watchers.WatchConfigTree(c, "my-service", opts, tw)
//	defer cancel()
//
// The page then shows the tree as the service's own watcher sees it,
// without another watch. untrack takes the tree off the page; it is
// idempotent. The returned watcher holds the latest snapshot until then.
func (h *Handler) Track(name string, w watchers.TreeWatcher) (tw watchers.TreeWatcher, untrack func()) {
	h.mu.Lock()
	h.lastID++
	t := &trackedTree{id: h.lastID, name: name, w: w}
	h.trees = append(h.trees, t)
	h.mu.Unlock()
	return recorder{h, t}, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if t.untracked {
			return
		}
		t.untracked, t.snap = true, nil
		for i, o := range h.trees {
			if o == t {
				h.trees = append(h.trees[:i:i], h.trees[i+1:]...)
				break
			}
		}
	}
}

// WatchTree starts a config tree of listener for the page alone, for
// services whose trees are out of reach (a gRPC channel's, inside its
// resolver): the client shares the watches with any other of the same
// resources, so it costs no more requests. cancel stops the tree and takes
// it off the page; it is idempotent.
func (h *Handler) WatchTree(listener string, opts watchers.TreeOptions) (cancel func()) {
	tw, untrack := h.Track(listener, nil)
	stop := watchers.WatchConfigTree(h.c, listener, opts, tw)
	return func() {
		stop()
		untrack()
	}
}

// treesLocked copies the list of trees, for a page to read without the
// lock: the snapshots are immutable.
func (h *Handler) treesLocked() []trackedTree {
	out := make([]trackedTree, len(h.trees))
	for i, t := range h.trees {
		out[i] = *t
	}
	return out
}
