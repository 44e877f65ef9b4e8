package transport

import (
	"os"
	"path/filepath"
)

// A FILESYSTEM server's files are watched through their directories by a
// dirWatcher, built per platform: on Linux straight on inotify
// (filewatch_linux.go), which tells when a writer closes a file, elsewhere
// on fsnotify (filewatch_other.go), which does not. Both present what
// happened to a name in a watched directory as a fileEvent, so that file.go
// reads a file at the same moments whichever reports it, except that where
// closes are reported (watchReportsCloses) a file changed in place is read
// when its writer closes it rather than once it has been quiet. watchDir
// and onEvent, below, are the fileTransport's side of it.

// fileOp is what happened to a name in a watched directory.
type fileOp uint8

const (
	// opWritten: the file's content changed, and its writer may not be
	// done.
	opWritten fileOp = iota + 1
	// opClosed: a writer of the file closed it: what it wrote is
	// complete. Only reported where watchReportsCloses.
	opClosed
	// opReplaced: the name holds another file now: created, renamed to.
	// A file renamed into place is complete.
	opReplaced
	// opRemoved: the file the name held is gone: removed, renamed away.
	// Another may be there already, whose own event follows.
	opRemoved
	// opAttrib: the file's metadata changed (its mode, say).
	opAttrib
	// opDirGone: the watched directory itself was removed or renamed; its
	// watch is gone with it, and the name is the directory's.
	opDirGone
)

// fileEvent tells that op happened to name, a path in a watched directory
// (the directory's own path for opDirGone).
type fileEvent struct {
	name string
	op   fileOp
}

// watchDir starts watching the directory of st, if it can and another type
// has not already.
func (t *fileTransport) watchDir(w *dirWatcher, st *fileState, states map[string]*fileState) {
	if w == nil || st.watched {
		return
	}
	for _, o := range states {
		if o != st && o.watched && o.dir == st.dir {
			st.watched, st.watchErr = true, ""
			return
		}
	}
	if err := w.add(st.dir); err != nil {
		// Tried again at every poll: say so once, and again only if
		// the reason changes.
		if err.Error() != st.watchErr {
			st.watchErr = err.Error()
			t.logger.Warn("cannot watch the directory of a file; polling it until it can", "dir", st.dir, "err", err, "every", t.interval)
		}
		return
	}
	if st.watchErr != "" {
		t.logger.Info("watching the directory of a file now", "dir", st.dir)
	}
	st.watched, st.watchErr = true, ""
}

// onEvent reacts to a change in a watched directory: the file named is read
// again, at once if it was replaced or its writer closed it, once complete
// if it changed in place (see settle); any other change in the directory (a
// symlink swapped, say) makes the files there checked.
func (t *fileTransport) onEvent(ev fileEvent, states map[string]*fileState, namesOf func(string) nameSet) {
	name := filepath.Clean(ev.name)
	for _, st := range states {
		switch {
		case ev.op == opDirGone:
			if name == st.dir {
				st.watched = false // the watch went with the directory; poll
			}
		case name == st.path && ev.op == opWritten && watchReportsCloses && st.watched:
			// Being written, whatever stat says (a rewrite within the
			// clock's resolution looks unchanged): wait for the close.
			if names := namesOf(st.typeURL); len(names) > 0 {
				info, _ := os.Stat(st.path)
				t.settle(st, info, names)
			}
		case name == st.path && (ev.op == opWritten || ev.op == opAttrib):
			t.checkChanged(st, namesOf(st.typeURL))
		case name == st.path && ev.op == opRemoved && watchReportsCloses && st.watched && fileExists(st.path):
			// Removed, and another file made there since, whose own
			// event is still to come: if it is being written ("rm;
			// > file"), reading it now could read half of it. It is
			// read when its writer closes it, or when it is renamed or
			// linked into place.
			if names := namesOf(st.typeURL); len(names) > 0 {
				info, _ := os.Stat(st.path)
				t.settle(st, info, names)
			}
		case name == st.path || (ev.op == opClosed && filepath.Dir(name) == st.dir && sameFileAt(name, st.path)):
			// Created (a rename over it, most often), removed, renamed
			// away, or closed by its writer (under its name, or another
			// of the same file: a hard link, a symlink's target):
			// whatever is there now is complete, or absent.
			if names := namesOf(st.typeURL); len(names) > 0 {
				st.unsettle()
				t.refresh(st, names, nil)
			}
		case filepath.Dir(name) == st.dir:
			t.checkChanged(st, namesOf(st.typeURL))
		}
	}
}

// fileExists tells whether there is a file at path.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// sameFileAt tells whether paths a and b lead to the same file.
func sameFileAt(a, b string) bool {
	ia, err := os.Stat(a)
	if err != nil {
		return false
	}
	ib, err := os.Stat(b)
	return err == nil && os.SameFile(ia, ib)
}
