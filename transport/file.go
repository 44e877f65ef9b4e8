package transport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/goxds/xds/bootstrap"
)

// A FILESYSTEM server is a set of files, one per type, each holding a
// DiscoveryResponse. The file is the server: its content is handed to the
// client as a SotW response whenever it changes, and again when names are
// added (the client ignores resources nobody asked for). There is nothing
// to ACK or NACK: what the client rejects is logged, and the last valid
// configuration stays.
//
// Changes are seen through a dirWatcher (filewatch.go: inotify on Linux,
// fsnotify elsewhere) on the directory of each file, so that a file
// replaced by an atomic rename is seen too, as is a symlink swapped under it
// (a Kubernetes ConfigMap volume); when the system cannot watch a directory
// (it does not exist yet, say: logged once, until that changes), or
// Options.PollFiles says so, the files are looked at every RefreshDelay
// instead.
//
// A file is read only when it is complete. One that is replaced (renamed
// over, created, removed, a symlink swapped: it is another file now) is read
// at once, since a rename is atomic. One that changes in place (the same
// file, with another size or modification time: "> file", an editor saving
// over it) may be half written, however long its writer pauses: where the
// watcher reports closes (inotify, on Linux) it is read when its writer
// closes it; elsewhere, and for files polled, once it has not changed for
// Options.FileQuietPeriod, each change starting the wait again. Until then
// the last content read stays in force, and is what names added meanwhile
// get. (A regular file created where there was none is a change in place
// too, on Linux: its creator is writing it. Elsewhere it is read when it
// appears, nearly always before anything is written into it: empty, it is
// ignored, and the writes that follow are changes in place. Write files by
// renaming a complete one over them, and no such case arises.)
//
// Failure cases:
//   - A file that cannot be read as a DiscoveryResponse is logged, and
//     every name subscribed of its type is reported unservable
//     (Handler.OnUnservable, an error matching ErrContentRejected), as is
//     each name added while it stays so; the last valid configuration
//     stays.
//   - A file missing (or unreadable) before it was ever read is logged, and
//     its names are reported unservable the same way, with the error of
//     reading it, until it appears. Either is about those names only: a
//     FILESYSTEM server has no stream, so Handler.OnStreamError is never
//     called, and the other types' files are served as usual.
//   - A file deleted after it was read changes nothing: the last
//     configuration stays in force and is still handed to new watches. The
//     deletion is logged, and the file is read again when it comes back.
//   - An empty file is taken for one being written, and ignored.

// buildFiles returns the transport of a FILESYSTEM server.
func (b grpcBuilder) buildFiles(server bootstrap.ServerConfig, h Handler) (Transport, error) {
	ctx, cancel := context.WithCancel(context.Background())
	t := &fileTransport{
		server:   server,
		handler:  h,
		logger:   b.opts.Logger.With("server", server.FileDir(), "protocol", server.APIType.String()),
		poll:     b.opts.PollFiles,
		interval: server.EffectiveRefreshDelay(),
		quiet:    b.opts.FileQuietPeriod,
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
		subs:     make(map[string]*fileSub),
	}
	go t.run()
	return t, nil
}

// fileTransport reads the files of one FILESYSTEM server.
type fileTransport struct {
	// Read-only after buildFiles.
	server   bootstrap.ServerConfig
	handler  Handler
	logger   *slog.Logger
	poll     bool
	interval time.Duration
	quiet    time.Duration // Options.FileQuietPeriod
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{} // closed when run returns
	wake     chan struct{} // capacity 1: subscriptions changed

	mu     sync.Mutex
	subs   map[string]*fileSub // by type URL; guarded by mu
	subNum uint64              // numbers the subscriptions of names; guarded by mu
}

// fileSub is what the client wants of one type.
type fileSub struct {
	names nameSet
	added map[string]struct{} // names added since run last looked
}

// nameSet maps each name wanted to the number of its subscription: a name
// unsubscribed and subscribed again is another subscription, with another
// number, whose watchers have been told nothing yet.
type nameSet map[string]uint64

func (ns nameSet) sorted() []string { return slices.Sorted(maps.Keys(ns)) }

// fileState is what run knows of one type's file. Only run touches it.
type fileState struct {
	typeURL string
	path    string
	dir     string
	watched bool        // its directory is watched by the dirWatcher
	info    os.FileInfo // of the file last read, to spot changes by polling
	sum     [sha256.Size]byte
	read    bool      // sum holds the hash of the bytes last read
	good    *Response // the last valid content
	bad     error     // why the content last read was rejected, or (never read) why the file cannot be read; nil if it was valid
	badTold nameSet   // the subscriptions told of bad
	missing bool      // the file's absence was reported
	told    []string  // the names last reported to the client
	serial  int       // numbers the responses, as nonces for logs
	// A change in place waits to be read until the file has been quiet:
	// pending is the file as last seen changed, and settleAt when it may
	// be read if it has not changed again. Zero settleAt: nothing waits.
	pending  os.FileInfo
	settleAt time.Time
	// closeWait: a change in place waits to be read until its writer
	// closes the file (where the watcher reports closes), however long.
	closeWait bool
	// watchErr is the error of the last attempt to watch the directory,
	// logged once: a directory that does not exist yet is tried again at
	// every poll, and logged again only once the error is another.
	watchErr string
}

// settling tells whether a change of the file waits for it to be quiet, or
// closed.
func (st *fileState) settling() bool { return !st.settleAt.IsZero() || st.closeWait }

func (st *fileState) unsettle() { st.pending, st.settleAt, st.closeWait = nil, time.Time{}, false }

func (t *fileTransport) UpdateSubscriptions(typeURL string, add, remove []string) {
	if _, ok := t.server.FilePath(typeURL); !ok {
		if len(add) > 0 {
			t.handler.OnUnservable(typeURL, add, errNoFile)
		}
		return
	}
	t.mu.Lock()
	s := t.subs[typeURL]
	if s == nil {
		s = &fileSub{names: make(nameSet)}
		t.subs[typeURL] = s
	}
	for _, n := range add {
		if _, ok := s.names[n]; !ok {
			t.subNum++
			s.names[n] = t.subNum
			if s.added == nil {
				s.added = make(map[string]struct{})
			}
			s.added[n] = struct{}{}
		}
	}
	for _, n := range remove {
		delete(s.names, n)
		delete(s.added, n)
	}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *fileTransport) Close() {
	t.cancel()
	<-t.done
}

// wanted returns the names wanted of each type, and those added since it
// last looked, and clears the added marks.
func (t *fileTransport) wanted() map[string]fileSub {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]fileSub, len(t.subs))
	for u, s := range t.subs {
		out[u] = fileSub{names: maps.Clone(s.names), added: s.added}
		s.added = nil
	}
	return out
}

func (t *fileTransport) run() {
	defer close(t.done)
	states := make(map[string]*fileState)
	var w *dirWatcher
	var events <-chan fileEvent
	var watchErrs <-chan error
	defer func() {
		if w != nil {
			w.close()
		}
	}()
	var ticker *time.Ticker
	var tick <-chan time.Time
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	// settle fires when the first file changed in place may be quiet.
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	var settleC <-chan time.Time
	started := false

	for {
		subs := t.wanted()
		if !started && len(subs) > 0 {
			started = true
			if !t.poll {
				var err error
				if w, err = newDirWatcher(); err != nil {
					t.logger.Warn("cannot watch files for changes; polling them instead", "err", err, "every", t.interval)
					w = nil
				} else {
					events, watchErrs = w.events(), w.errors()
				}
			}
		}
		t.serveWanted(w, states, subs)
		polling := false
		for _, st := range states {
			polling = polling || !st.watched
		}
		switch {
		case polling && ticker == nil:
			ticker = time.NewTicker(t.interval)
			tick = ticker.C
		case !polling && ticker != nil:
			ticker.Stop()
			ticker, tick = nil, nil
		}
		settleC = t.armSettle(settle, states)

		select {
		case <-t.ctx.Done():
			return
		case <-t.wake:
		case ev := <-events:
			t.onEvent(ev, states, t.namesOf)
		case err := <-watchErrs:
			// An overflowed event queue loses events: look at every file.
			t.logger.Warn("file watch error; checking every file", "err", err)
			for _, st := range states {
				t.checkChanged(st, t.namesOf(st.typeURL))
				if st.closeWait {
					// Its close may be among the events lost:
					// wait for quiet instead.
					st.closeWait, st.settleAt = false, time.Now().Add(t.quiet)
				}
			}
		case <-tick:
			for _, st := range states {
				t.watchDir(w, st, states)
				t.checkChanged(st, t.namesOf(st.typeURL))
			}
		case <-settleC:
			for _, st := range states {
				t.settleDue(st, t.namesOf(st.typeURL))
			}
		}
	}
}

// serveWanted reads the file of each type wanted for the first time, and
// hands what was read to the names added.
func (t *fileTransport) serveWanted(w *dirWatcher, states map[string]*fileState, subs map[string]fileSub) {
	for _, typeURL := range slices.Sorted(maps.Keys(subs)) {
		sub := subs[typeURL]
		st := states[typeURL]
		if st == nil {
			path, _ := t.server.FilePath(typeURL)
			path = filepath.Clean(path)
			st = &fileState{typeURL: typeURL, path: path, dir: filepath.Dir(path)}
			states[typeURL] = st
		}
		t.watchDir(w, st, states)
		switch {
		case len(sub.names) == 0:
		case st.settling() && st.good != nil:
			// Being written: new names get what was read last, and
			// the file is read once quiet.
			if len(sub.added) > 0 {
				t.redeliver(st, sub.names, sortedKeys(sub.added))
			}
		case !st.read || len(sub.added) > 0:
			t.refresh(st, sub.names, sortedKeys(sub.added))
		}
	}
}

// armSettle sets timer to fire when the first file waiting to be quiet may
// be, and returns its channel; nil when no file waits.
func (t *fileTransport) armSettle(timer *time.Timer, states map[string]*fileState) <-chan time.Time {
	var first time.Time
	for _, st := range states {
		if st.settling() && (first.IsZero() || st.settleAt.Before(first)) {
			first = st.settleAt
		}
	}
	timer.Stop()
	if first.IsZero() {
		return nil
	}
	timer.Reset(time.Until(first))
	return timer.C
}

// settle makes st wait until its file, seen changed in place as info, has
// been closed by its writer, where the watcher of its directory reports
// closes; otherwise until it has been quiet for the quiet period, a further
// change starting the wait again.
func (t *fileTransport) settle(st *fileState, info os.FileInfo, names nameSet) {
	if t.quiet < 0 {
		t.refresh(st, names, nil)
		return
	}
	if watchReportsCloses && st.watched {
		if !st.settling() {
			t.logger.Debug("file changed in place; reading it once its writer closes it", "type", st.typeURL, "path", st.path)
		}
		st.pending, st.settleAt, st.closeWait = info, time.Time{}, true
		return
	}
	if st.settling() && sameFileState(info, st.pending) {
		return // seen already; the wait goes on
	}
	if !st.settling() {
		t.logger.Debug("file changed in place; reading it once it is quiet", "type", st.typeURL, "path", st.path, "quiet", t.quiet)
	}
	st.pending, st.settleAt = info, time.Now().Add(t.quiet)
}

// settleDue reads the file of st if it has been quiet since its wait
// began, and otherwise waits again.
func (t *fileTransport) settleDue(st *fileState, names nameSet) {
	if st.settleAt.IsZero() || time.Now().Before(st.settleAt) {
		return // nothing waits, or for a close
	}
	info, err := os.Stat(st.path)
	if err == nil && !sameFileState(info, st.pending) {
		st.pending, st.settleAt = info, time.Now().Add(t.quiet)
		return
	}
	st.unsettle()
	if len(names) > 0 {
		t.refresh(st, names, nil)
	}
}

// sameFileState tells whether a and b are the same file, unchanged.
func sameFileState(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// namesOf returns the names wanted of typeURL.
func (t *fileTransport) namesOf(typeURL string) nameSet {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.subs[typeURL]; s != nil {
		return maps.Clone(s.names)
	}
	return nil
}

// checkChanged reads the file of st again if it looks changed: at once if it
// is another file than the one last read, once quiet if it is that file,
// changed in place.
func (t *fileTransport) checkChanged(st *fileState, names nameSet) {
	if len(names) == 0 {
		return
	}
	info, err := os.Stat(st.path)
	switch {
	case err == nil && sameFileState(info, st.info):
		return
	case err == nil && st.info != nil && os.SameFile(info, st.info):
		t.settle(st, info, names)
		return
	case err != nil && st.missing:
		return // still gone
	}
	st.unsettle()
	t.refresh(st, names, nil)
}

// refresh reads the file of st and hands what changed to the client. For
// the names just added, if any, what the others were told is told again
// even if the file did not change (see redeliver).
func (t *fileTransport) refresh(st *fileState, names nameSet, added []string) {
	redeliver := len(added) > 0
	info, err := os.Stat(st.path)
	var data []byte
	if err == nil {
		data, err = os.ReadFile(st.path)
	}
	if err != nil {
		st.info = nil
		if !st.missing {
			st.missing = true
			if st.good == nil {
				// Nothing to serve: every name waits on the file, and is
				// told why (as for a rejected one, see redeliver).
				t.logger.Warn("cannot read the file of a resource type", "type", st.typeURL, "err", err)
				st.bad, st.badTold = fmt.Errorf("file of %s: %w", st.typeURL, err), maps.Clone(names)
				t.reportUnservable(st, names.sorted(), st.bad)
			} else {
				t.logger.Warn("the file of a resource type is gone; keeping its last configuration", "type", st.typeURL, "err", err)
			}
		}
		if redeliver {
			t.redeliver(st, names, added)
		}
		return
	}
	st.missing = false
	st.info = info
	if len(data) == 0 {
		t.logger.Debug("empty file ignored, as one being written", "type", st.typeURL, "path", st.path)
		if redeliver {
			t.redeliver(st, names, added)
		}
		return
	}
	sum := sha256.Sum256(data)
	if st.read && sum == st.sum {
		if redeliver {
			t.redeliver(st, names, added)
		}
		return
	}
	st.read, st.sum = true, sum
	resp, format, err := decodeResponseFile(st.path, data, st.typeURL)
	if err != nil {
		t.logger.Warn("file rejected; the last valid configuration stays", "type", st.typeURL, "path", st.path, "format", format, "err", err)
		st.bad, st.badTold = contentRejected{fmt.Errorf("file %s: %w", st.path, err)}, maps.Clone(names)
		if redeliver && st.good != nil {
			t.deliver(st, st.good, names.sorted())
		}
		t.reportUnservable(st, names.sorted(), st.bad)
		return
	}
	st.bad, st.badTold = nil, nil
	version := resp.GetVersionInfo()
	if version == "" {
		version = hex.EncodeToString(sum[:6])
	}
	st.serial++
	st.good = &Response{
		TypeURL:        st.typeURL,
		Version:        version,
		Nonce:          strconv.Itoa(st.serial),
		Resources:      resp.GetResources(),
		ResourceErrors: resp.GetResourceErrors(),
	}
	t.logger.Debug("file read", "type", st.typeURL, "path", st.path, "format", format, "version", version, "resources", len(resp.GetResources()))
	t.deliver(st, st.good, names.sorted())
}

// redeliver tells the names just added what the others were told of the
// file as last read: its last valid content, if any, and the error of the
// content last read, if it was rejected, or of reading it, if it was never
// read. A name told of that error already
// (a read after its subscription, before run saw it added) is not told
// again: the client would report it to its watchers twice.
func (t *fileTransport) redeliver(st *fileState, names nameSet, added []string) {
	if st.good != nil {
		t.deliver(st, st.good, names.sorted())
	}
	if st.bad == nil {
		return
	}
	var untold []string
	for _, n := range added {
		num, ok := names[n]
		if !ok || st.badTold[n] == num {
			continue
		}
		if st.badTold == nil {
			st.badTold = make(nameSet)
		}
		st.badTold[n] = num
		untold = append(untold, n)
	}
	t.reportUnservable(st, untold, st.bad)
}

// deliver hands r to the client and waits until its watchers have it.
func (t *fileTransport) deliver(st *fileState, r *Response, names []string) {
	if !slices.Equal(names, st.told) {
		// The file has every name the client asks for, or never will:
		// the does-not-exist timers may start.
		st.told = names
		t.handler.OnSubscriptionsSent(st.typeURL, names)
	}
	applied := make(chan struct{})
	var once sync.Once
	if err := t.handler.OnResponse(r, func() { once.Do(func() { close(applied) }) }); err != nil {
		t.logger.Warn("resources of the file rejected; each keeps its last valid version", "type", st.typeURL, "path", st.path, "version", r.Version, "err", err)
	}
	select {
	case <-applied:
	case <-t.ctx.Done():
	}
}

// reportUnservable tells the client that names of st's type cannot be
// served, and why: the file's content was rejected, or the file cannot be
// read.
func (t *fileTransport) reportUnservable(st *fileState, names []string, cause error) {
	if len(names) > 0 {
		t.handler.OnUnservable(st.typeURL, names, cause)
	}
}

// errNoFile is why the names of a type resource_files has no file for
// cannot be fetched.
var errNoFile = errors.New("resource_files names no file for this resource type")
