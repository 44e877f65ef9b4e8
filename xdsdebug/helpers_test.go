package xdsdebug_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
	"github.com/goxds/xds/watchers"
	"github.com/goxds/xds/xdsdebug"
)

// The page starts no goroutine, and the clients and trees of the tests are
// all closed: nothing may be left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	nodeID = "debug-node"
	// timeout bounds every wait; a test that reaches it has failed.
	timeout = 20 * time.Second
	// bigTimeout bounds the wait for a tree of 10,000 clusters: 15 s
	// under -race at a load of 20 was seen.
	bigTimeout = 3 * time.Minute
)

var fastBackoff = backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 50 * time.Millisecond}

// env is a client of an in-process management server, and its debug page
// served over HTTP at /debug/xds.
type env struct {
	t   testing.TB
	ms  *testutils.ManagementServer
	c   *client.Client
	h   *xdsdebug.Handler
	url string // of the page
}

type envOptions struct {
	expiry time.Duration // WatchExpiry; 0: an hour
	// fallback: the primary of the bootstrap is an address nothing
	// listens on, and the management server its fallback.
	fallback bool
	// persist is the client's Options.Persist.Dir, "" for none.
	persist string
	// noServer: no management server; the bootstrap names serverURI, or
	// else an address nothing listens on.
	noServer  bool
	serverURI string
}

func newEnv(t testing.TB, res testutils.Resources, o envOptions) *env {
	t.Helper()
	var ms *testutils.ManagementServer
	bo := testutils.BootstrapOptions{NodeID: nodeID}
	if o.noServer {
		bo.ServerURI = cmp.Or(o.serverURI, deadAddress(t))
	} else {
		var err error
		ms, err = testutils.StartManagementServer(testutils.ManagementServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ms.Stop)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := ms.Update(ctx, nodeID, res); err != nil {
			t.Fatal(err)
		}
		bo.ServerURI = ms.Address()
	}
	if o.fallback {
		bo.ServerURI = deadAddress(t)
		bo.FallbackServers = []testutils.BootstrapServer{{URI: ms.Address()}}
	}
	b, err := bootstrap.Parse(testutils.BootstrapJSON(bo))
	if err != nil {
		t.Fatal(err)
	}
	expiry := o.expiry
	if expiry == 0 {
		expiry = time.Hour
	}
	c, err := client.New(b, client.Options{
		WatchExpiry: expiry,
		Persist:     client.PersistOptions{Dir: o.persist, Wait: 50 * time.Millisecond},
		Logger:      slog.New(slog.DiscardHandler),
		TransportOptions: transport.Options{Backoff: fastBackoff, DialOptions: []grpc.DialOption{
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: fastBackoff, MinConnectTimeout: time.Second}),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	h := xdsdebug.New(c, xdsdebug.Options{})
	mux := http.NewServeMux()
	mux.Handle("/debug/xds", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, ms: ms, c: c, h: h, url: srv.URL + "/debug/xds"}
}

// deadAddress is an address nothing listens on: a port taken and freed.
func deadAddress(t testing.TB) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// watchTree has the page watch listener's tree and waits for its first
// snapshot, or ResourceError, through a tracked watcher of the test's.
func (e *env) watchTree(listener string) *watchers.Snapshot {
	e.t.Helper()
	return e.watchTreeWithin(listener, timeout)
}

// watchTreeWithin is watchTree, waiting up to wait: a tree of 10,000
// clusters under -race on a loaded machine takes more than timeout.
func (e *env) watchTreeWithin(listener string, wait time.Duration) *watchers.Snapshot {
	e.t.Helper()
	got := make(chan any, 10)
	tw, untrack := e.h.Track(listener, watchers.TreeWatcherFuncs{
		OnUpdate:        func(s *watchers.Snapshot) { got <- s },
		OnResourceError: func(err error) { got <- err },
	})
	cancel := watchers.WatchConfigTree(e.c, listener, watchers.TreeOptions{}, tw)
	e.t.Cleanup(func() { cancel(); untrack() })
	select {
	case v := <-got:
		s, _ := v.(*watchers.Snapshot)
		return s
	case <-time.After(wait):
		e.t.Fatalf("no event of the tree of %s in %v", listener, wait)
		return nil
	}
}

// get fetches the page with the given query, and returns its status and
// body.
func (e *env) get(query string) (int, string) {
	e.t.Helper()
	resp, err := http.Get(e.url + query)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// getJSON fetches the page as JSON into v, and fails the test unless it
// is answered 200.
func (e *env) getJSON(query string, v any) {
	e.t.Helper()
	sep := "?"
	if strings.Contains(query, "?") {
		sep = "&"
	}
	code, body := e.get(query + sep + "format=json")
	if code != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", query, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		e.t.Fatalf("GET %s: %v in %s", query, err, body)
	}
}

// waitFor polls the page's JSON at query until ok says it shows what the
// test waits for: the client gets there on its own time.
func waitFor[T any](e *env, query string, ok func(T) bool) T {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var v T
		e.getJSON(query, &v)
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("GET %s never showed what the test waits for; last: %+v", query, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func clusterNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cluster-%05d", i)
	}
	return names
}

// JSON shapes the tests read.
type (
	jsonServer struct {
		URI       string     `json:"server_uri"`
		State     string     `json:"state"`
		Current   bool       `json:"current"`
		Since     *time.Time `json:"since"`
		Error     string     `json:"error"`
		LastError string     `json:"last_error"`
	}
	jsonOverview struct {
		Node        struct{ ID string }
		Authorities []struct {
			Name          string
			Current       int
			FallbackInUse bool `json:"fallback_in_use"`
			Servers       []jsonServer
		}
		Types []struct {
			TypeURL  string `json:"type_url"`
			Total    int
			ByStatus map[string]int `json:"by_status"`
			Errors   int
		}
		Trees []struct {
			ID       int
			Name     string
			Clusters int
			Updates  int
		}
	}
	jsonPage struct {
		Total, Page, Limit, Pages int
		Prev, Next                string
	}
	jsonResource struct {
		TypeURL  string `json:"type_url"`
		Name     string
		Version  string
		Status   string
		Error    string
		FromDisk bool `json:"from_disk"`
		Server   string
		Watchers int
		Value    json.RawMessage
	}
	jsonResources struct {
		Page      jsonPage
		Resources []jsonResource
	}
	jsonTree struct {
		Name         string
		Listener     string
		RouteConfig  string `json:"route_config"`
		Clusters     int
		Routes       int
		Page         jsonPage
		ClustersPage []struct {
			Name, Kind, Target, Error string
			Endpoints                 int
		} `json:"clusters_page"`
		RoutesPage []struct{ Match, Action string } `json:"routes_page"`
		Text       string
	}
)
