package transport

// A FILESYSTEM server's files are watched through their directories by a
// dirWatcher, built per platform: on Linux straight on inotify
// (filewatch_linux.go), which tells when a writer closes a file, elsewhere
// on fsnotify (filewatch_other.go), which does not. Both present what
// happened to a name in a watched directory as a fileEvent, so that file.go
// reads a file at the same moments whichever reports it, except that where
// closes are reported (watchReportsCloses) a file changed in place is read
// when its writer closes it rather than once it has been quiet.

// fileOp is what happened to a name in a watched directory.
type fileOp uint8

const (
	// opWritten: the file's content changed, and its writer may not be
	// done.
	opWritten fileOp = iota + 1
	// opClosed: a writer of the file closed it: what it wrote is
	// complete. Only reported where watchReportsCloses.
	opClosed
	// opReplaced: the name holds another file now, or none: created,
	// renamed to or away, removed. A file renamed into place is complete.
	opReplaced
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
