package watchers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// A real server is asked for a resource only once the client knows it
// needs it, so it always answers LDS, RDS, CDS, EDS in that order. The
// tests here make the client hold resources in other orders: other
// watchers of the same client fetch them first, parts of the tree appear
// on the server in every order, and a fake server answers in every order.

const abTree = "svc/svc-route " + "a:eds(a)[127.0.0.1:8080] b:eds(b)[127.0.0.1:8080]"

// permutations returns every order of items.
func permutations[T any](items []T) [][]T {
	if len(items) <= 1 {
		return [][]T{append([]T(nil), items...)}
	}
	var out [][]T
	for i := range items {
		rest := append(append([]T(nil), items[:i]...), items[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]T{items[i]}, p...))
		}
	}
	return out
}

// preWatch watches the named resources of typ with a watcher that ignores
// them, and returns once each has arrived. The watches end with the test.
func preWatch[T resources.Resource](t *testing.T, c *client.Client, typ *resources.Type[T], names ...string) {
	t.Helper()
	for _, name := range names {
		got := make(chan struct{})
		cancel := client.Watch(c, typ, name, client.WatcherFuncs[T]{OnUpdate: func(T) {
			select {
			case <-got:
			default:
				close(got)
			}
		}})
		t.Cleanup(cancel)
		select {
		case <-got:
		case <-time.After(testTimeout):
			t.Fatalf("pre-watch of %s %q: nothing arrived within %v", typ.TypeName(), name, testTimeout)
		}
	}
}

// The tree starts while other watchers of its client already hold parts
// of it: it uses them without asking the server again.
func TestPartsCachedBeforeTheTree(t *testing.T) {
	tests := []struct {
		name    string
		watched []string // types fetched before the tree starts
	}{
		{"route config before listener", []string{rdsURL}},
		{"clusters and endpoints before listener", []string{cdsURL, edsURL}},
		{"endpoints before clusters", []string{edsURL}},
		{"everything before listener", []string{rdsURL, cdsURL, edsURL}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachServerVariant(t, func(t *testing.T, v variant) {
				e := newEnv(t, v, longExpiry)
				e.update(simpleTree("svc", "svc-route", "a", "b"))
				for _, typ := range tc.watched {
					switch typ {
					case rdsURL:
						preWatch(t, e.c, resources.RouteConfigType, "svc-route")
					case cdsURL:
						preWatch(t, e.c, resources.ClusterType, "a", "b")
					case edsURL:
						preWatch(t, e.c, resources.EndpointsType, "a", "b")
					}
				}
				before := make(map[string]int)
				for _, typ := range tc.watched {
					_, before[typ] = e.subs.counts(typ)
				}

				r, _ := e.watch("svc", watchers.TreeOptions{})
				if got := describe(r.nextUpdate()); got != abTree {
					t.Errorf("snapshot %s, want %s", got, abTree)
				}
				barrier(t, e.c)
				r.noMore()
				for _, typ := range tc.watched {
					if _, after := e.subs.counts(typ); after != before[typ] {
						t.Errorf("%s: the tree changed subscriptions %d times; the names were already subscribed", shortType(typ), after-before[typ])
					}
				}
			})
		})
	}
}

// The parts of a tree appear on the server one at a time, in every order,
// after the listener: no snapshot until the last, then exactly one.
func TestPartsAppearInAnyOrder(t *testing.T) {
	full := simpleTree("svc", "svc-route", "a", "b")
	for _, order := range permutations([]string{"route", "clusters", "endpoints"}) {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			t.Parallel()
			forEachServerVariant(t, func(t *testing.T, v variant) {
				e := newEnv(t, v, longExpiry)
				res := testutils.Resources{Listeners: full.Listeners}
				e.update(res)
				r, _ := e.watch("svc", watchers.TreeOptions{})
				has := make(map[string]bool)
				for i, part := range order {
					switch part {
					case "route":
						res.Routes = full.Routes
					case "clusters":
						res.Clusters = full.Clusters
					case "endpoints":
						res.Endpoints = full.Endpoints
					}
					has[part] = true
					e.update(res)
					if i == len(order)-1 {
						break
					}
					// Wait until the client asked for all it can know of
					// so far; then nothing may have been delivered.
					e.subs.waitSubscribed(t, rdsURL, "svc-route")
					if has["route"] {
						e.subs.waitSubscribed(t, cdsURL, "a", "b")
						if has["clusters"] {
							e.subs.waitSubscribed(t, edsURL, "a", "b")
						}
					}
					barrier(t, e.c)
					r.noMore()
				}
				if got := describe(r.nextUpdate()); got != abTree {
					t.Errorf("snapshot %s, want %s", got, abTree)
				}
				barrier(t, e.c)
				r.noMore()
			})
		})
	}
}

// A fake server sends the four resources in each of the 24 orders. Other
// watchers have subscribed to the route config, clusters and endpoints, so
// the client takes them whenever they come. Only the last response may
// produce a snapshot, and it produces exactly one.
func TestResponsesInEveryOrder(t *testing.T) {
	type part struct {
		typeURL string
		msgs    []proto.Message
	}
	parts := []part{
		{ldsURL, []proto.Message{testutils.Listener("svc", "svc-route")}},
		{rdsURL, []proto.Message{testutils.WeightedRouteConfig("svc-route", "*",
			testutils.ClusterWeight{Name: "a", Weight: 1}, testutils.ClusterWeight{Name: "b", Weight: 1})}},
		{cdsURL, []proto.Message{testutils.Cluster("a", ""), testutils.Cluster("b", "")}},
		{edsURL, []proto.Message{
			testutils.ClusterLoadAssignment("a", "127.0.0.1", 8080),
			testutils.ClusterLoadAssignment("b", "127.0.0.1", 8080)}},
	}
	for _, order := range permutations(parts) {
		var names []string
		for _, p := range order {
			names = append(names, shortType(p.typeURL))
		}
		t.Run(strings.Join(names, ","), func(t *testing.T) {
			t.Parallel()
			forEachVariant(t, func(t *testing.T, v variant) {
				fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(fs.Stop)
				c := newClient(t, fs.Address(), v, longExpiry)
				for _, name := range []string{"a", "b"} {
					t.Cleanup(client.WatchCluster(c, name, client.WatcherFuncs[*resources.Cluster]{}))
					t.Cleanup(client.WatchEndpoints(c, name, client.WatcherFuncs[*resources.Endpoints]{}))
				}
				t.Cleanup(client.WatchRouteConfig(c, "svc-route", client.WatcherFuncs[*resources.RouteConfig]{}))
				r := newRecorder(t)
				t.Cleanup(watchers.WatchConfigTree(c, "svc", watchers.TreeOptions{}, r))

				fc := newFakeClient(t, fs, v.apiType == testutils.APITypeDelta)
				fc.waitSubscribed(map[string]int{ldsURL: 1, rdsURL: 1, cdsURL: 2, edsURL: 2})
				for i, p := range order {
					fc.sendAndWaitACK(p.typeURL, fmt.Sprintf("nonce-%d", i), p.msgs)
					barrier(t, c)
					if i < len(order)-1 {
						r.noMore()
					}
				}
				if got := describe(r.nextUpdate()); got != abTree {
					t.Errorf("snapshot %s, want %s", got, abTree)
				}
				barrier(t, c)
				r.noMore()
			})
		})
	}
}

// fakeClient drives the exchange with one client on one stream of a
// FakeServer.
type fakeClient struct {
	t     *testing.T
	st    *testutils.FakeStream
	delta bool
	// seen holds every name subscribed on the stream, by type: requests
	// read while waiting for something else still count.
	seen map[string]map[string]bool
}

// newFakeClient waits for the next stream of fs.
func newFakeClient(t *testing.T, fs *testutils.FakeServer, delta bool) *fakeClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	st, err := fs.NextStream(ctx)
	if err != nil {
		t.Fatalf("waiting for a stream: %v", err)
	}
	return &fakeClient{t: t, st: st, delta: delta, seen: make(map[string]map[string]bool)}
}

// next returns the type and response nonce of the next request, and
// records the names it subscribes (all of them for SotW).
func (f *fakeClient) next() (typeURL, nonce string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), testTimeout)
	defer cancel()
	var names []string
	if f.delta {
		req, err := f.st.NextDeltaRequest(ctx)
		if err != nil {
			f.t.Fatalf("waiting for a delta request: %v", err)
		}
		typeURL, names, nonce = req.GetTypeUrl(), req.GetResourceNamesSubscribe(), req.GetResponseNonce()
	} else {
		req, err := f.st.NextRequest(ctx)
		if err != nil {
			f.t.Fatalf("waiting for a request: %v", err)
		}
		typeURL, names, nonce = req.GetTypeUrl(), req.GetResourceNames(), req.GetResponseNonce()
	}
	if f.seen[typeURL] == nil {
		f.seen[typeURL] = make(map[string]bool)
	}
	for _, n := range names {
		f.seen[typeURL][n] = true
	}
	return typeURL, nonce
}

// waitSubscribed reads requests until, for each type, at least as many
// names have been subscribed on the stream as want says.
func (f *fakeClient) waitSubscribed(want map[string]int) {
	f.t.Helper()
	done := func() bool {
		for typ, n := range want {
			if len(f.seen[typ]) < n {
				return false
			}
		}
		return true
	}
	for !done() {
		f.next()
	}
}

// sendAndWaitACK sends msgs as one response of typeURL, versioned by its
// nonce, and reads requests until the one that answers it. The client replies only after applying
// the response and queueing its callbacks, so a barrier then sees them run.
func (f *fakeClient) sendAndWaitACK(typeURL, nonce string, msgs []proto.Message) {
	f.t.Helper()
	var err error
	if f.delta {
		var rs []*discoveryv3.Resource
		for _, m := range msgs {
			rs = append(rs, testutils.WrapResource(nameOf(m), nonce, 0, m))
		}
		err = f.st.SendDelta(testutils.DeltaResponse(typeURL, nonce, nil, rs...))
	} else {
		err = f.st.Send(testutils.SotWResponse(typeURL, nonce, nonce, msgs...))
	}
	if err != nil {
		f.t.Fatal(err)
	}
	for {
		typ, got := f.next()
		if typ == typeURL && got == nonce {
			return
		}
	}
}

func nameOf(m proto.Message) string {
	switch m := m.(type) {
	case *listenerv3.Listener:
		return m.GetName()
	case *routev3.RouteConfiguration:
		return m.GetName()
	case *clusterv3.Cluster:
		return m.GetName()
	case *endpointv3.ClusterLoadAssignment:
		return m.GetClusterName()
	}
	panic(fmt.Sprintf("no name for %T", m))
}
