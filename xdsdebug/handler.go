package xdsdebug

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goxds/xds/client"
)

// Paging of the lists (resources, a tree's clusters and routes).
const (
	// DefaultLimit is how many rows a list shows when the request does not
	// say (limit=).
	DefaultLimit = 100
	// MaxLimit is the most rows one page of a list may have, so that no
	// page grows with the size of the configuration: at 10,000 clusters a
	// page of them is some 300 KB of HTML.
	MaxLimit = 1000
	// maxQuery bounds the filter text, which is matched against every name.
	maxQuery = 1024
)

// Options tune a Handler. The zero value is ready to use.
type Options struct {
	// Clock gives the time against which the page shows how long ago
	// things happened, and stamps the events of tracked trees. Nil: the
	// real clock. Give the client's clock (client.Options.Clock) so that
	// both agree.
	Clock client.Clock
}

// Handler serves the debug page of one client: an http.Handler to mount
// beside /debug/pprof. Make it with New. It is safe for concurrent use,
// holds no state beyond the trees it is given (Track, WatchTree), and
// starts no goroutine.
type Handler struct {
	c     *client.Client // read-only
	clock client.Clock   // read-only

	mu     sync.Mutex
	trees  []*trackedTree // in the order tracked; guarded by mu
	lastID int            // the id of the last tree tracked; guarded by mu
}

// New returns the debug page of c.
func New(c *client.Client, opts Options) *Handler {
	return &Handler{c: c, clock: opts.Clock}
}

func (h *Handler) now() time.Time {
	if h.clock != nil {
		return h.clock.Now()
	}
	return time.Now()
}

// requestError is a request the page cannot answer, with the status to
// answer it with.
type requestError struct {
	code int
	msg  string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &requestError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

// query is a request's parameters, checked.
type query struct {
	vals    url.Values
	view    string // "", "resources", "resource", "tree"
	json    bool
	typ     string // a type URL, "" for all (resources), or as given (resource)
	name    string // view=resource: the name with parameters
	q       string // filter: names containing it
	status  string // filter: a client.Status name, or "ERROR"
	page    int    // from 1
	limit   int
	tree    int    // view=tree: the tree's id
	list    string // view=tree: "clusters", "routes" or "text"
	cluster string // view=tree: a cluster to print, "" for none
}

// ServeHTTP serves the page: the overview; with view=resources, the
// resources of the cache (type=, q=, status=, page=, limit=); with
// view=resource&type=&name=, one of them; with view=tree&tree=, a tracked
// config tree (list=clusters or routes, q=, page=, limit=; list=text for
// the tree printed; cluster= for one cluster printed). format=json,
// or an Accept header that asks for application/json and not text/html,
// gives the same as JSON. Only GET and HEAD are served.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "xdsdebug: method "+r.Method+" not allowed: the page is read-only", http.StatusMethodNotAllowed)
		return
	}
	q, err := parseQuery(r)
	var data any
	if err == nil {
		data, err = h.build(q)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err != nil {
		code := http.StatusInternalServerError
		var re *requestError
		if errors.As(err, &re) {
			code = re.code
		}
		if q.json {
			writeJSON(w, code, map[string]string{"error": err.Error()})
			return
		}
		http.Error(w, "xdsdebug: "+err.Error(), code)
		return
	}
	if q.json {
		writeJSON(w, http.StatusOK, data)
		return
	}
	var buf bytes.Buffer
	if err := render(&buf, q, h.now(), data); err != nil {
		http.Error(w, "xdsdebug: rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// No script runs, none is loaded, and the page cannot be framed.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(buf.Bytes())
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"error": "encoding the page: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// parseQuery checks r's parameters. The format is read first, so that an
// error in the others is reported in the format asked for.
func parseQuery(r *http.Request) (query, error) {
	vals := r.URL.Query()
	q := query{vals: vals, page: 1, limit: DefaultLimit}
	switch f := vals.Get("format"); f {
	case "json":
		q.json = true
	case "", "html":
		accept := r.Header.Get("Accept")
		q.json = f == "" && strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html")
	default:
		return q, badRequest("format: want html or json, got %q", f)
	}
	q.view = vals.Get("view")
	switch q.view {
	case "", "resources", "resource", "tree":
	default:
		return q, notFound("view: no view %q (want resources, resource or tree, or none for the overview)", q.view)
	}
	var err error
	if q.page, err = intParam(vals, "page", 1, 1, 1<<30); err != nil {
		return q, err
	}
	if q.limit, err = intParam(vals, "limit", DefaultLimit, 1, MaxLimit); err != nil {
		return q, err
	}
	if q.q = vals.Get("q"); len(q.q) > maxQuery {
		return q, badRequest("q: the filter is %d bytes, more than %d", len(q.q), maxQuery)
	}
	q.typ, q.name = vals.Get("type"), vals.Get("name")
	if st := vals.Get("status"); st != "" {
		q.status = strings.ToUpper(st)
		if !validStatus(q.status) {
			return q, badRequest("status: want one of %s or ERROR, got %q", strings.Join(statusNames, ", "), st)
		}
	}
	if q.view == "tree" {
		if q.tree, err = intParam(vals, "tree", 0, 1, 1<<30); err != nil {
			return q, err
		}
		if q.tree == 0 {
			return q, badRequest("tree: missing (the id of a tree, as the overview links it)")
		}
		switch q.list = vals.Get("list"); q.list {
		case "":
			q.list = "clusters"
		case "clusters", "routes", "text":
		default:
			return q, badRequest("list: want clusters, routes or text, got %q", q.list)
		}
		q.cluster = vals.Get("cluster")
	}
	return q, nil
}

func intParam(vals url.Values, name string, def, lo, hi int) (int, error) {
	s := vals.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s: want a whole number from %d to %d, got %q", name, lo, hi, s)
	}
	return n, nil
}

// build gathers what q asks for.
func (h *Handler) build(q query) (any, error) {
	switch q.view {
	case "resources":
		return h.resourceList(q)
	case "resource":
		return h.resource(q)
	case "tree":
		return h.tree(q)
	}
	return h.overview(), nil
}
