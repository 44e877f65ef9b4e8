package client

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/resources"
)

// DefaultPersistWait is how long a client with a persistence directory
// waits for its servers at start before serving what it persisted.
const DefaultPersistWait = 5 * time.Second

// persistInterval is the least time between two rounds of the writer: a
// flood of updates costs a rewrite of each type changed every interval, not
// one per update (a 10,000-cluster file takes some 14 ms to write).
const persistInterval = 200 * time.Millisecond

// PersistOptions make the client keep the last version it accepted of every
// resource it watches in a directory, and serve those at start when its
// servers cannot be reached: the idea of Envoy's xds_resources_delegate.
// The zero value (no Dir) persists nothing.
type PersistOptions struct {
	// Dir is the directory, made if missing. The client owns the files
	// ending in ".lkg" there, one per resource type, and the temporary
	// files it writes them through: two clients must not share one.
	Dir string
	// Wait is how long after New the client waits for its servers: a
	// watched resource whose server has not answered once by then gets
	// the persisted value. Zero: DefaultPersistWait.
	Wait time.Duration
	// MaxAge, if set, is how old a file, and each resource in it, may be
	// to be used: an older one is stale, and ignored. A resource's age
	// counts from when a server last vouched for it, not from the last
	// rewrite of its file. Zero: any age.
	MaxAge time.Duration
}

// UpdateInfo says where an update comes from.
type UpdateInfo struct {
	// FromDisk: the value is the one persisted by an earlier run
	// (Options.Persist), served because the resource's server has not
	// answered yet. The server's first word on the resource replaces it.
	FromDisk bool
}

// UpdateInfoWatcher is a Watcher that wants to know where each update comes
// from: for it, the client calls UpdateWithInfo instead of Update.
type UpdateInfoWatcher[T resources.Resource] interface {
	Watcher[T]
	UpdateWithInfo(value T, info UpdateInfo)
}

// persister is the client's persistence: what it read at New, and the
// goroutine that writes.
type persister struct {
	dir    string
	wait   time.Duration
	maxAge time.Duration
	// kick wakes the writer (capacity 1: kicks while it writes coalesce);
	// stop ends it after a last write; done is closed when it has ended.
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	// The rest is guarded by Client.mu.
	//
	// records are what the files held, by type URL and entry key, until a
	// server that has answered supersedes them (persistChangedLocked); they
	// are served while their server has not answered, and written back
	// with each rewrite of their type's file.
	records map[string]map[string]lkgRecord
	// ready: Wait has passed; resources of servers that never answered
	// are served from records.
	ready bool
	timer Timer
	// dirty are the types whose file must be rewritten.
	dirty map[string]bool
}

// newPersister reads dir and starts the writer; startPersistWait starts
// the wait. Files that cannot be used are logged and left alone: the next
// write of their type replaces them.
func (c *Client) newPersister(opts PersistOptions) *persister {
	p := &persister{
		dir:     opts.Dir,
		wait:    opts.Wait,
		maxAge:  opts.MaxAge,
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		records: make(map[string]map[string]lkgRecord),
		dirty:   make(map[string]bool),
	}
	if p.wait <= 0 {
		p.wait = DefaultPersistWait
	}
	c.readPersisted(p)
	go c.persistLoop(p)
	return p
}

// startPersistWait starts the Wait timer, once c.persist is set: the timer
// may fire at once.
func (c *Client) startPersistWait() {
	c.mu.Lock()
	defer c.unlock()
	c.persist.timer = c.clock.AfterFunc(c.persist.wait, c.persistWaitOver)
}

// bootstrapServers lists the server URIs of the bootstrap, sorted: the
// servers a persisted file may have come from.
func (c *Client) bootstrapServers() []string {
	var out []string
	for _, s := range c.cfg.Servers {
		out = append(out, s.ServerURI)
	}
	for _, a := range c.cfg.Authorities {
		for _, s := range a.Servers {
			out = append(out, s.ServerURI)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readPersisted loads every file of the directory into p.records, and
// removes the temporary files a crash left behind.
func (c *Client) readPersisted(p *persister) {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		c.logger.Warn("cannot make the last-known-good directory", "dir", p.dir, "err", err)
		return
	}
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		c.logger.Warn("cannot read the last-known-good directory", "dir", p.dir, "err", err)
		return
	}
	known := c.bootstrapServers()
	for _, de := range ents {
		if de.IsDir() {
			continue
		}
		path := filepath.Join(p.dir, de.Name())
		if strings.HasPrefix(de.Name(), lkgTempPrefix) && strings.Contains(de.Name(), lkgFileSuffix+"-") {
			_ = os.Remove(path) // a write that never reached its rename
			continue
		}
		if !strings.HasSuffix(de.Name(), lkgFileSuffix) {
			continue
		}
		f, err := c.readPersistedFile(path, known)
		if err == nil && p.maxAge > 0 {
			if age := time.Since(f.written); age > p.maxAge {
				err = fmt.Errorf("stale: written %v ago, more than the %v allowed", age.Round(time.Second), p.maxAge)
			}
		}
		if err != nil {
			c.logger.Warn("ignoring last-known-good file", "file", path, "reason", err)
			continue
		}
		recs := make(map[string]lkgRecord, len(f.records))
		foreign, stale := 0, 0
		for _, r := range f.records {
			if _, ok := slices.BinarySearch(known, r.server); !ok {
				foreign++
				continue
			}
			if p.maxAge > 0 && time.Since(r.written) > p.maxAge {
				// Kept from a run whose server did not answer, and
				// rewritten since with fresher ones: stale all the same.
				stale++
				continue
			}
			recs[r.name] = r
		}
		if foreign > 0 {
			c.logger.Warn("ignoring resources of servers not in the bootstrap in last-known-good file",
				"file", path, "ignored", foreign)
		}
		if stale > 0 {
			c.logger.Warn("ignoring stale resources in last-known-good file",
				"file", path, "ignored", stale, "max_age", p.maxAge)
		}
		p.records[f.typeURL] = recs
	}
}

// readPersistedFile reads and checks one file: intact, written for this
// node, of a type the client knows, under its own name, by a client of at
// least one of this bootstrap's servers.
func (c *Client) readPersistedFile(path string, known []string) (*lkgFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := decodeLKG(data)
	if err != nil {
		return nil, err
	}
	if node := c.cfg.Node.ID; f.node != node {
		return nil, fmt.Errorf("written for node %q, this client is node %q", f.node, node)
	}
	if _, ok := c.types[f.typeURL]; !ok {
		return nil, fmt.Errorf("resource type %q is not known to this client", f.typeURL)
	}
	if want := lkgFileName(f.typeURL); filepath.Base(path) != want {
		return nil, fmt.Errorf("holds %s, whose file is %s", f.typeURL, want)
	}
	for _, s := range f.servers {
		if _, ok := slices.BinarySearch(known, s); ok {
			return f, nil
		}
	}
	return nil, fmt.Errorf("written for servers %q, none of them in this bootstrap", f.servers)
}

// persistWaitOver serves the persisted resources of every server that has
// not answered since the client started.
func (c *Client) persistWaitOver() {
	c.mu.Lock()
	defer c.unlock()
	p := c.persist
	if c.closed || p.ready {
		return
	}
	p.ready, p.timer = true, nil
	for _, tc := range c.caches {
		served := 0
		for _, e := range tc.entries {
			if c.serveFromDiskLocked(tc, e) {
				served++
			}
		}
		served += c.serveWildcardFromDiskLocked(tc)
		if served > 0 {
			// One line per type: a tree of 10,000 clusters is served at once.
			c.logq.Warn("servers not answering; serving last-known-good resources from disk",
				"type", tc.typ.TypeURL(), "count", served, "dir", p.dir, "wait", p.wait)
		}
	}
}

// serveWildcardFromDiskLocked gives the wildcard watchers of tc, if any,
// every persisted resource of the type that no entry holds, and says how
// many.
func (c *Client) serveWildcardFromDiskLocked(tc *typeCache) (served int) {
	ww := tc.wildcard
	if c.persist == nil || !c.persist.ready || ww == nil || ww.srv.answered {
		return 0
	}
	for name, r := range c.persist.records[tc.typ.TypeURL()] {
		// Records are keyed as entries are: a key with a NUL is a name
		// with dynamic parameters, which a wildcard watch does not have.
		if hasNUL(name) || tc.entries[name] != nil || !authorityHas(ww.auth, r.server) {
			continue
		}
		e := &entry{name: name, auth: ww.auth, srv: ww.srv}
		tc.entries[name] = e
		if c.serveFromDiskLocked(tc, e) {
			served++
		} else {
			delete(tc.entries, name)
		}
	}
	return served
}

func authorityHas(a *authority, uri string) bool {
	return a.configIndex(uri) >= 0
}

// configIndex returns the index in a.configs of the first server of URI
// uri, -1 if a has none.
func (a *authority) configIndex(uri string) int {
	for i, s := range a.configs {
		if s.ServerURI == uri {
			return i
		}
	}
	return -1
}

// diskContextLocked is the DecodeContext a value read from disk is decoded
// in: that of the server recorded with it (the one that sent it, the
// fallback's after a fallback), as this run's bootstrap describes the
// server of that URI, the authority's first if it lists the URI twice. The
// value is then what that server's sending it again would make: a
// Cluster's lrs_server "self" names that server, and rules that depend on
// the server's features judge by that server's. nil if a has no server of
// URI uri (readPersistedFile and authorityHas keep such records out).
func (c *Client) diskContextLocked(a *authority, uri string) *resources.DecodeContext {
	i := a.configIndex(uri)
	if i < 0 {
		return nil
	}
	if s := c.servers[a.configs[i].Key()]; s != nil {
		return s.dctx
	}
	return c.decodeContext(&a.configs[i])
}

// serveFromDiskLocked gives e its persisted value if the wait is over, its
// server never answered, nothing is held and the server has said nothing
// of it, and reports whether it did. The value is decoded and validated as
// if the server had sent it; one that fails is dropped with a log line.
func (c *Client) serveFromDiskLocked(tc *typeCache, e *entry) bool {
	p := c.persist
	if p == nil || !p.ready || e.srv.answered || e.hasData() ||
		(e.status != StatusRequested && e.status != StatusTimeout) {
		return false
	}
	typeURL := tc.typ.TypeURL()
	r, ok := p.records[typeURL][e.key()]
	if !ok || !authorityHas(e.auth, r.server) {
		return false
	}
	name, v, err := tc.typ.Decode(c.diskContextLocked(e.auth, r.server), &anypb.Any{TypeUrl: typeURL, Value: r.value})
	if err == nil && name != "" && canonicalReceived(name) != e.name {
		err = fmt.Errorf("the value is named %q", name)
	}
	if err != nil {
		// Written by a client that accepted it, now refused (another
		// version of goxds, a stricter validation): it will not improve.
		delete(p.records[typeURL], e.key())
		c.logq.Warn("ignoring last-known-good resource", "file", filepath.Join(p.dir, lkgFileName(typeURL)),
			"type", typeURL, "name", e.logName(), "reason", err)
		return false
	}
	e.stopDNETimer()
	e.value, e.version, e.src = v, r.version, e.srv
	e.setValueRaw(nonNil(r.value))
	e.setFromDisk(true)
	// Requested still: the server has said nothing of it in this run. The
	// error a timeout reported is over: there is a value now.
	e.setStatus(StatusRequested, nil, nil, c.clock.Now())
	c.logq.Debug("serving last-known-good resource from disk", "server", e.srv.cfg.ServerURI,
		"type", typeURL, "name", e.logName(), "version", r.version)
	c.notifyLocked(tc, e, notifyUpdateFromDisk, v, nil, true)
	return true
}

// serverAnsweredLocked records that s has answered: its persisted records
// are no longer served. They stay in their files until s says something of
// their names (persistChangedLocked): a server that answers need not send
// every name an earlier run held (one not watched yet in this run), and its
// answer says nothing of another server's names.
func (c *Client) serverAnsweredLocked(s *server) {
	s.answered = true
}

// persistChangedLocked schedules a rewrite of the file of tc's type: e's
// value was accepted, replaced, dropped or deleted. If that is the word of
// a server that has answered, it supersedes the record an earlier run left
// of e, which is forgotten.
func (c *Client) persistChangedLocked(tc *typeCache, e *entry) {
	p := c.persist
	if p == nil {
		return
	}
	if e.srv != nil && e.srv.answered && e.rare().canonical == "" {
		delete(p.records[tc.typ.TypeURL()], e.key())
	}
	p.dirty[tc.typ.TypeURL()] = true
	select {
	case p.kick <- struct{}{}:
	default: // a kick is pending: the writer will see this type too
	}
}

// persistHasRecordLocked tells whether an earlier run left a record of e
// that is still kept.
func (c *Client) persistHasRecordLocked(tc *typeCache, e *entry) bool {
	if c.persist == nil {
		return false
	}
	_, ok := c.persist.records[tc.typ.TypeURL()][e.key()]
	return ok
}

// persistLoop is the writer: it rewrites the files of dirty types, however
// many changes came since its last round, until Close, after which it
// writes a last time and ends. It runs off the client mutex (but for
// copying out what to write) and off the callback goroutine.
func (c *Client) persistLoop(p *persister) {
	defer close(p.done)
	for {
		select {
		case <-p.kick:
			c.persistWrite(p)
		case <-p.stop:
			c.persistWrite(p)
			return
		}
		// Changes made meanwhile wait for the next round, together.
		select {
		case <-time.After(persistInterval):
		case <-p.stop:
			c.persistWrite(p)
			return
		}
	}
}

// persistWrite writes the file of every dirty type.
func (c *Client) persistWrite(p *persister) {
	c.mu.Lock()
	if len(p.dirty) == 0 {
		c.unlock()
		return
	}
	files := make([]*lkgFile, 0, len(p.dirty))
	for typeURL := range p.dirty {
		files = append(files, c.persistSnapshotLocked(typeURL))
	}
	clear(p.dirty)
	c.unlock()
	for _, f := range files {
		path := filepath.Join(p.dir, lkgFileName(f.typeURL))
		if len(f.records) == 0 {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				c.logger.Warn("cannot remove last-known-good file", "file", path, "err", err)
			} else if err == nil {
				_ = syncDir(p.dir)
			}
			continue
		}
		if err := writeFileAtomic(path, encodeLKG(f)); err != nil {
			c.logger.Warn("cannot write last-known-good file", "file", path, "err", err)
		}
	}
}

// persistSnapshotLocked copies out what the file of typeURL must hold:
// every value held, valid, and from a server or an earlier run's file, each
// under its entry's key (the name, with the dynamic parameters of the watch
// if any: a restarted client finds it by the same watch), and every record
// an earlier run left that no server has superseded since (a name not
// watched in this run, or whose server has not answered): one server's
// answer must not erase what another server, down at the moment, sent
// before. A value with a TTL is left out: it is not meant to outlive its
// server's word, let alone a restart. Values are the entries' byte slices,
// shared, not copied. The constraints of a variant are not kept: a value
// from disk counts as the variant without constraints until the server
// sends its own.
func (c *Client) persistSnapshotLocked(typeURL string) *lkgFile {
	f := &lkgFile{node: c.cfg.Node.ID, servers: c.bootstrapServers(), typeURL: typeURL, written: time.Now()}
	kept := c.persist.records[typeURL]
	// The names held, for the kept records not to repeat them: none to
	// track once every record is superseded, the common case.
	var held map[string]bool
	if len(kept) > 0 {
		held = make(map[string]bool, len(kept))
	}
	if tc := c.caches[typeURL]; tc != nil {
		f.records = make([]lkgRecord, 0, len(kept)+len(tc.entries))
		for name, e := range tc.entries {
			x := e.rare()
			if e.value == nil || x.ttlTimer != nil || x.canonical != "" {
				continue
			}
			src := e.src
			if src == nil {
				src = e.srv
			}
			written := f.written
			if held != nil {
				held[name] = true
			}
			server := src.cfg.ServerURI
			if r, ok := kept[name]; ok && x.fromDisk {
				// No fresher for having been served, and still the value
				// of the server that sent it (not of e.srv, which only
				// serves it): the next run decodes it in that server's
				// context again (diskContextLocked).
				written, server = r.written, r.server
			}
			f.records = append(f.records, lkgRecord{name: name, version: e.version, server: server, written: written, value: e.valueRaw})
		}
	}
	for name, r := range kept {
		if !held[name] {
			f.records = append(f.records, r)
		}
	}
	return f
}

// closePersister stops the wait timer and ends the writer after a last
// write. Called by Close, with c.mu not held, once no response can apply.
func (c *Client) closePersister() {
	p := c.persist
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
}

// stopPersistTimerLocked is Close's part under c.mu.
func (c *Client) stopPersistTimerLocked() {
	if p := c.persist; p != nil && p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}
