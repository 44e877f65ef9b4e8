package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The last-known-good file format. One file per resource type holds every
// resource of that type the client keeps: a rewrite costs what the type
// costs, but a 10,000-resource update is one file and one fsync, where a
// file per resource would be 10,000 of each.
//
//	magic    "goxds-lkg 2\n"
//	header   node id, the bootstrap's server URIs, the type URL, when written
//	records  name, version, when received, server (an index into the
//	         header's servers), value
//	checksum SHA-256 of everything before it
//
// Strings and byte fields are a uvarint length then the bytes; counts are
// uvarints; times are varints of Unix nanoseconds. A record has a time of
// its own because a file keeps the records of servers that have not
// answered since (persistSnapshotLocked): rewriting them must not make
// them look fresh to PersistOptions.MaxAge. Version 1, without it, is still
// read, each record taking the file's time. The checksum comes
// last so that a torn or truncated file (a crash mid-write, though the
// rename makes that unlikely; a disk that lies) is found out before
// anything of it is parsed.

const (
	lkgMagic   = "goxds-lkg 2\n"
	lkgMagicV1 = "goxds-lkg 1\n"
)

// lkgFileSuffix ends the name of every file the client writes in the
// directory; other files there are not its business, but for the temporary
// files it writes them through, which start with lkgTempPrefix.
const (
	lkgFileSuffix = ".lkg"
	lkgTempPrefix = ".tmp-"
)

// lkgFile is the content of one last-known-good file.
type lkgFile struct {
	node    string
	servers []string // the bootstrap's server URIs, when written
	typeURL string
	written time.Time
	records []lkgRecord
}

// lkgRecord is one resource as accepted from a server.
type lkgRecord struct {
	name    string
	version string
	server  string // the server_uri it came from
	// written is when the value was last known good: written from a
	// server's word, or the time an earlier file gave it.
	written time.Time
	// value is the serialized resource: the entry's bytes when written,
	// shared, not copied.
	value []byte
}

// encodeLKG serializes f, servers of records added to its server list as
// needed.
func encodeLKG(f *lkgFile) []byte {
	index := make(map[string]int, len(f.servers))
	servers := append([]string(nil), f.servers...)
	for i, s := range servers {
		index[s] = i
	}
	for _, r := range f.records {
		if _, ok := index[r.server]; !ok {
			index[r.server] = len(servers)
			servers = append(servers, r.server)
		}
	}
	size := len(lkgMagic) + 64 + len(f.node) + len(f.typeURL) + sha256.Size
	for _, s := range servers {
		size += len(s) + 4
	}
	for _, r := range f.records {
		size += len(r.name) + len(r.version) + len(r.value) + 26
	}
	b := make([]byte, 0, size)
	b = append(b, lkgMagic...)
	putString := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	putString(f.node)
	b = binary.AppendUvarint(b, uint64(len(servers)))
	for _, s := range servers {
		putString(s)
	}
	putString(f.typeURL)
	b = binary.AppendVarint(b, f.written.UnixNano())
	b = binary.AppendUvarint(b, uint64(len(f.records)))
	for _, r := range f.records {
		putString(r.name)
		putString(r.version)
		b = binary.AppendVarint(b, r.written.UnixNano())
		b = binary.AppendUvarint(b, uint64(index[r.server]))
		b = binary.AppendUvarint(b, uint64(len(r.value)))
		b = append(b, r.value...)
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// errLKGChecksum: the file's checksum does not match its content.
var errLKGChecksum = errors.New("checksum mismatch: the file is corrupt or truncated")

// decodeLKG parses a file written by encodeLKG. It never panics; its errors
// say what is wrong.
func decodeLKG(data []byte) (*lkgFile, error) {
	if len(data) < len(lkgMagic)+sha256.Size {
		return nil, fmt.Errorf("too short (%d bytes) to be a last-known-good file", len(data))
	}
	v1 := bytes.HasPrefix(data, []byte(lkgMagicV1))
	if !v1 && !bytes.HasPrefix(data, []byte(lkgMagic)) {
		return nil, errors.New("not a last-known-good file of this version (bad magic)")
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errLKGChecksum
	}
	d := lkgDecoder{b: body[len(lkgMagic):]}
	f := &lkgFile{}
	f.node = d.str("node id")
	nServers := d.count("servers", 1)
	for i := 0; i < nServers && d.err == nil; i++ {
		f.servers = append(f.servers, d.str("server"))
	}
	f.typeURL = d.str("type URL")
	f.written = time.Unix(0, d.varint("write time"))
	nRecords := d.count("records", 5)
	for i := 0; i < nRecords && d.err == nil; i++ {
		var r lkgRecord
		r.name = d.str("resource name")
		r.version = d.str("resource version")
		r.written = f.written
		if !v1 {
			r.written = time.Unix(0, d.varint("record time"))
		}
		idx := d.uvarint("server index")
		if d.err == nil && idx >= uint64(len(f.servers)) {
			d.err = fmt.Errorf("record %d names server %d of %d", i, idx, len(f.servers))
		}
		if d.err == nil {
			r.server = f.servers[idx]
		}
		// A copy: the file's buffer is not kept for one record.
		r.value = append([]byte{}, d.bytes("resource value")...)
		if d.err == nil && r.name == "" {
			d.err = fmt.Errorf("record %d has no name", i)
		}
		f.records = append(f.records, r)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d bytes after the last record", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return f, nil
}

// lkgDecoder reads the fields of a file; the first error sticks and makes
// every later read return zero values.
type lkgDecoder struct {
	b   []byte
	err error
}

func (d *lkgDecoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("bad length of %s", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *lkgDecoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("bad %s", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count of items each at least min (> 0) bytes long, so
// that a count larger than the data left is refused before anything is
// allocated for it.
func (d *lkgDecoder) count(what string, min int) int {
	v := d.uvarint(what)
	if d.err == nil && v > uint64(len(d.b)/min) {
		d.err = fmt.Errorf("%s: %d is more than the file holds", what, v)
		return 0
	}
	return int(v)
}

func (d *lkgDecoder) bytes(what string) []byte {
	n := d.uvarint(what)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("%s: length %d is more than the %d bytes left", what, n, len(d.b))
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *lkgDecoder) str(what string) string { return string(d.bytes(what)) }

// lkgFileName is the file of a type in the directory: the type URL's last
// part, which the registry's type names keep to letters, digits and dots;
// anything else is replaced, so that no type URL names a path outside the
// directory.
func lkgFileName(typeURL string) string {
	name := typeURL[strings.LastIndex(typeURL, "/")+1:]
	name = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, name)
	if name == "" || strings.Trim(name, ".") == "" {
		name = "_"
	}
	return name + lkgFileSuffix
}

// writeFileAtomic replaces path with data: a temporary file in the same
// directory, synced, renamed over path, and the directory synced, so that
// after a crash path holds the old content or the new, never a mix.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, lkgTempPrefix+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename or removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
