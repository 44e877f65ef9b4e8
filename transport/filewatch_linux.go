//go:build linux

package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// watchReportsCloses: inotify tells when a writer closes a file
// (IN_CLOSE_WRITE), which fsnotify keeps to itself; that is why Linux
// watches through golang.org/x/sys/unix directly.
const watchReportsCloses = true

// watchMask is what a directory's watch reports. IN_ONLYDIR: a path that is
// not a directory is an error, not a watch on a file.
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB |
	unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// dirWatcher reports changes in directories through one inotify instance.
type dirWatcher struct {
	// f is the inotify descriptor, non-blocking: a read of it waits in
	// the runtime's poller, so that closing f ends the read, and the
	// reader goroutine with it. Watches are added and removed through raw,
	// which keeps the descriptor from being closed (and its number reused)
	// during the call.
	f      *os.File
	raw    syscall.RawConn
	evs    chan fileEvent
	errs   chan error
	done   chan struct{} // closed by close: the reader stops sending
	exited chan struct{} // closed when the reader returns

	mu   sync.Mutex
	dirs map[int32][]string // the directories of each watch descriptor; guarded by mu
}

func newDirWatcher() (*dirWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &dirWatcher{
		f:      f,
		raw:    raw,
		evs:    make(chan fileEvent),
		errs:   make(chan error),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
		dirs:   make(map[int32][]string),
	}
	go w.read()
	return w, nil
}

func (w *dirWatcher) events() <-chan fileEvent { return w.evs }
func (w *dirWatcher) errors() <-chan error     { return w.errs }

// add watches dir, which must exist and be a directory.
func (w *dirWatcher) add(dir string) error {
	dir = filepath.Clean(dir)
	var wd int
	var err error
	if cerr := w.raw.Control(func(fd uintptr) { wd, err = unix.InotifyAddWatch(int(fd), dir, watchMask) }); cerr != nil {
		return fmt.Errorf("inotify_add_watch %s: %w", dir, cerr)
	}
	if err != nil {
		return &os.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// Two paths of one directory (a symlink to it) share its descriptor.
	if !slices.Contains(w.dirs[int32(wd)], dir) {
		w.dirs[int32(wd)] = append(w.dirs[int32(wd)], dir)
	}
	return nil
}

// close stops the watcher; no goroutine of it is left when it returns.
func (w *dirWatcher) close() {
	close(w.done)
	w.f.Close()
	<-w.exited
}

func (w *dirWatcher) read() {
	defer close(w.exited)
	buf := make([]byte, 16*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		switch {
		case errors.Is(err, os.ErrClosed):
			return
		case err != nil:
			// Not expected of inotify: report it, and stop (the
			// transport polls what it can no longer watch).
			w.sendErr(fmt.Errorf("reading inotify events: %w", err))
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			size := int(binary.NativeEndian.Uint32(buf[off+12:]))
			off += unix.SizeofInotifyEvent
			if off+size > n {
				w.sendErr(errors.New("inotify event cut short"))
				break
			}
			name := buf[off : off+size]
			off += size
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i] // padded with NULs
			}
			if !w.dispatch(wd, mask, string(name)) {
				return
			}
		}
	}
}

// dispatch reports one inotify event; false when the watcher is closing.
func (w *dirWatcher) dispatch(wd int32, mask uint32, name string) bool {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		return w.sendErr(errors.New("inotify event queue overflowed: events were lost"))
	}
	w.mu.Lock()
	dirs := w.dirs[wd]
	if mask&(unix.IN_IGNORED|unix.IN_MOVE_SELF) != 0 {
		// The watch is gone (IN_IGNORED: its directory was removed),
		// or would follow the directory to its new name, where its
		// events would be taken for the old one's: drop it.
		delete(w.dirs, wd)
	}
	w.mu.Unlock()
	if mask&unix.IN_MOVE_SELF != 0 {
		_ = w.raw.Control(func(fd uintptr) { _, _ = unix.InotifyRmWatch(int(fd), uint32(wd)) })
	}
	for _, dir := range dirs {
		var ev fileEvent
		switch {
		case mask&(unix.IN_IGNORED|unix.IN_MOVE_SELF) != 0:
			ev = fileEvent{name: dir, op: opDirGone}
		case name == "" || mask&unix.IN_DELETE_SELF != 0:
			continue // about the directory; IN_IGNORED follows a removal
		case mask&unix.IN_CLOSE_WRITE != 0:
			ev = fileEvent{name: filepath.Join(dir, name), op: opClosed}
		case mask&unix.IN_MODIFY != 0:
			ev = fileEvent{name: filepath.Join(dir, name), op: opWritten}
		case mask&unix.IN_CREATE != 0:
			ev = fileEvent{name: filepath.Join(dir, name), op: createdOp(filepath.Join(dir, name))}
		case mask&unix.IN_MOVED_TO != 0:
			ev = fileEvent{name: filepath.Join(dir, name), op: opReplaced}
		case mask&(unix.IN_MOVED_FROM|unix.IN_DELETE) != 0:
			ev = fileEvent{name: filepath.Join(dir, name), op: opRemoved}
		case mask&unix.IN_ATTRIB != 0:
			ev = fileEvent{name: filepath.Join(dir, name), op: opAttrib}
		default:
			continue
		}
		select {
		case w.evs <- ev:
		case <-w.done:
			return false
		}
	}
	return true
}

// createdOp says what the creation of path means. A regular file created
// is being written by whoever created it ("> file", a copy): it is
// complete when they close it. Anything else (a symlink, made whole by one
// call) is complete at once.
func createdOp(path string) fileOp {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
		return opWritten
	}
	return opReplaced
}

func (w *dirWatcher) sendErr(err error) bool {
	select {
	case w.errs <- err:
		return true
	case <-w.done:
		return false
	}
}
