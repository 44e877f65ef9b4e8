package watchers_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// fullTree is a tree with every kind of part: weighted clusters, an
// aggregate over EDS and LOGICAL_DNS clusters, an EDS service name that
// differs from the cluster's, a redirect route that names no cluster, and
// a second virtual host for another authority, whose cluster must not be
// watched.
func fullTree() testutils.Resources {
	rc := routeConfig("svc-route", []string{"svc"},
		weightedRoute("/w", testutils.ClusterWeight{Name: "a", Weight: 80}, testutils.ClusterWeight{Name: "b", Weight: 20}),
		route("/agg", "agg"),
		redirectRoute("/r"),
		route("/", "a"),
	)
	rc.VirtualHosts = append(rc.VirtualHosts, &routev3.VirtualHost{
		Name:    "other",
		Domains: []string{"other.example.com"},
		Routes:  []*routev3.Route{route("/", "not-for-us")},
	})
	return testutils.Resources{
		Listeners: []*listenerv3.Listener{testutils.Listener("svc", "svc-route")},
		Routes:    []*routev3.RouteConfiguration{rc},
		Clusters: []*clusterv3.Cluster{
			testutils.Cluster("a", ""),
			testutils.Cluster("b", "b-eds"),
			testutils.AggregateCluster("agg", "c", "dns", "a"),
			testutils.Cluster("c", ""),
			testutils.LogicalDNSCluster("dns", "dns.example.com", 8443),
		},
		Endpoints: []*endpointv3.ClusterLoadAssignment{
			testutils.ClusterLoadAssignment("a", "10.0.0.1", 80, 81),
			testutils.ClusterLoadAssignment("b-eds", "10.0.0.2", 80),
			testutils.ClusterLoadAssignment("c", "10.0.0.3", 80),
		},
	}
}

const fullTreeDesc = "svc/svc-route a:eds(a)[10.0.0.1:80 10.0.0.1:81] agg:agg[c dns a] b:eds(b-eds)[10.0.0.2:80] c:eds(c)[10.0.0.3:80] dns:dns(dns.example.com:8443)"

// The whole tree arrives at once: one snapshot with every part, and
// subscriptions to exactly what the chosen virtual host leads to.
func TestFullTree(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		e.update(fullTree())
		r, _ := e.watch("svc", watchers.TreeOptions{})

		s := r.nextUpdate()
		if got := describe(s); got != fullTreeDesc {
			t.Errorf("snapshot:\n got %s\nwant %s", got, fullTreeDesc)
		}
		if s.VirtualHost.Name != "svc-route-vhost" {
			t.Errorf("VirtualHost = %q, want svc-route-vhost", s.VirtualHost.Name)
		}
		if s.RouteConfig.Name != "svc-route" || s.Listener.Name != "svc" {
			t.Errorf("Listener %q, RouteConfig %q", s.Listener.Name, s.RouteConfig.Name)
		}
		if got := s.Clusters.Get("agg").Cluster.Kind; got != resources.ClusterKindAggregate {
			t.Errorf("agg kind = %v", got)
		}

		e.subs.waitNames(t, ldsURL, "svc")
		e.subs.waitNames(t, rdsURL, "svc-route")
		e.subs.waitNames(t, cdsURL, "a", "agg", "b", "c", "dns")
		e.subs.waitNames(t, edsURL, "a", "b-eds", "c")
		barrier(t, e.c)
		r.noMore()
	})
}

// The authority picks the virtual host; "" means the listener name.
func TestAuthority(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		res := fullTree()
		res.Clusters = append(res.Clusters, testutils.Cluster("not-for-us", ""))
		res.Endpoints = append(res.Endpoints, testutils.ClusterLoadAssignment("not-for-us", "10.9.9.9", 80))
		e.update(res)
		r, _ := e.watch("svc", watchers.TreeOptions{Authority: "OTHER.example.com"})
		s := r.nextUpdate()
		if s.VirtualHost.Name != "other" {
			t.Errorf("VirtualHost = %q, want other", s.VirtualHost.Name)
		}
		if got, want := describe(s), "svc/svc-route not-for-us:eds(not-for-us)[10.9.9.9:80]"; got != want {
			t.Errorf("snapshot %s, want %s", got, want)
		}
	})
}

// What cannot be had: the listener or route config missing or invalid, or
// no virtual host, breaks the whole tree; a cluster or its endpoints
// missing or invalid is that cluster's error in a snapshot. Each case is a
// tree of its own, named with its own prefix, and all of them are served
// and watched together, so that the does-not-exist timers run once.
func TestUnusableParts(t *testing.T) {
	tests := []struct {
		name string
		// res builds the case's resources; every name starts with p and
		// the listener is p+"svc".
		res func(p string) testutils.Resources
		// treeErr: the tree as a whole fails with this; else a snapshot
		// like want (with p for %[1]s) with clusterErrs.
		treeErr     error
		want        string
		clusterErrs map[string]error
	}{{
		name:    "listener missing",
		res:     func(string) testutils.Resources { return testutils.Resources{} },
		treeErr: client.ErrResourceNotFound,
	}, {
		name: "listener invalid",
		res: func(p string) testutils.Resources {
			return testutils.Resources{Listeners: listeners(&listenerv3.Listener{Name: p + "svc"})} // no api_listener
		},
		treeErr: client.ErrResourceInvalid,
	}, {
		name: "a server's listener",
		res: func(p string) testutils.Resources {
			hcm := &hcmv3.HttpConnectionManager{
				RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: routeConfig("", []string{"*"}, route("/", p+"a"))},
				HttpFilters: []*hcmv3.HttpFilter{{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{
					TypedConfig: testutils.MarshalAny(&routerv3.Router{}),
				}}},
			}
			return testutils.Resources{Listeners: listeners(&listenerv3.Listener{
				Name: p + "svc",
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
				}}},
				FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
					Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: testutils.MarshalAny(hcm)},
				}}}},
			})}
		},
		treeErr: watchers.ErrServerListener,
	}, {
		name: "route config missing",
		res: func(p string) testutils.Resources {
			return testutils.Resources{Listeners: listeners(testutils.Listener(p+"svc", p+"route"))}
		},
		treeErr: client.ErrResourceNotFound,
	}, {
		name: "no virtual host for the authority",
		res: func(p string) testutils.Resources {
			return testutils.Resources{
				Listeners: listeners(testutils.Listener(p+"svc", p+"route")),
				Routes:    []*routev3.RouteConfiguration{routeConfig(p+"route", []string{"elsewhere"}, route("/", p+"a"))},
			}
		},
		treeErr: watchers.ErrNoVirtualHost,
	}, {
		name: "cluster missing",
		res: func(p string) testutils.Resources {
			return without(simpleTree(p+"svc", p+"route", p+"a", p+"ghost"), p+"ghost")
		},
		want:        "%[1]ssvc/%[1]sroute %[1]sa:eds(%[1]sa)[127.0.0.1:8080] %[1]sghost:err",
		clusterErrs: map[string]error{"ghost": client.ErrResourceNotFound},
	}, {
		name: "cluster invalid",
		res: func(p string) testutils.Resources {
			res := simpleTree(p+"svc", p+"route", p+"a", p+"bad")
			res.Clusters[1].ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
			return res
		},
		want:        "%[1]ssvc/%[1]sroute %[1]sa:eds(%[1]sa)[127.0.0.1:8080] %[1]sbad:err",
		clusterErrs: map[string]error{"bad": client.ErrResourceInvalid},
	}, {
		name: "endpoints missing",
		res: func(p string) testutils.Resources {
			res := simpleTree(p+"svc", p+"route", p+"a")
			res.Endpoints = nil
			return res
		},
		want:        "%[1]ssvc/%[1]sroute %[1]sa:err",
		clusterErrs: map[string]error{"a": client.ErrResourceNotFound},
	}, {
		name: "aggregate child missing",
		res: func(p string) testutils.Resources {
			res := withEDS(testutils.Resources{
				Listeners: listeners(testutils.Listener(p+"svc", p+"route")),
				Routes:    []*routev3.RouteConfiguration{testutils.RouteConfig(p+"route", "*", p+"agg")},
				Clusters:  []*clusterv3.Cluster{testutils.AggregateCluster(p+"agg", p+"ghost", p+"a")},
			}, p+"a")
			return res
		},
		// A leaf in error keeps its place among the leaves.
		want:        "%[1]ssvc/%[1]sroute %[1]sa:eds(%[1]sa)[127.0.0.1:8080] %[1]sagg:agg[%[1]sghost %[1]sa] %[1]sghost:err",
		clusterErrs: map[string]error{"ghost": client.ErrResourceNotFound},
	}}
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, shortExpiry)
		var all testutils.Resources
		for i, tc := range tests {
			res := tc.res(fmt.Sprintf("c%d-", i))
			all.Listeners = append(all.Listeners, res.Listeners...)
			all.Routes = append(all.Routes, res.Routes...)
			all.Clusters = append(all.Clusters, res.Clusters...)
			all.Endpoints = append(all.Endpoints, res.Endpoints...)
		}
		e.update(all)
		recorders := make([]*recorder, len(tests))
		for i := range tests {
			recorders[i], _ = e.watch(fmt.Sprintf("c%d-svc", i), watchers.TreeOptions{})
		}
		for i, tc := range tests {
			p, r := fmt.Sprintf("c%d-", i), recorders[i]
			if tc.treeErr != nil {
				if err := r.nextResourceError(); !errors.Is(err, tc.treeErr) {
					t.Errorf("%s: ResourceError(%v), want one wrapping %v", tc.name, err, tc.treeErr)
				}
				continue
			}
			s := r.nextUpdate()
			if got, want := describe(s), fmt.Sprintf(tc.want, p); got != want {
				t.Errorf("%s: snapshot %s, want %s", tc.name, got, want)
			}
			for name, want := range tc.clusterErrs {
				if err := s.Clusters.Get(p + name).Err; !errors.Is(err, want) {
					t.Errorf("%s: Clusters[%q].Err = %v, want one wrapping %v", tc.name, p+name, err, want)
				}
			}
			if tc.name == "endpoints missing" && s.Clusters.Get(p+"a").Cluster == nil {
				t.Errorf("%s: Cluster is nil; the cluster exists, only its endpoints do not", tc.name)
			}
		}
		barrier(t, e.c)
		for _, r := range recorders {
			r.noMore()
		}
	})
}

// without drops a cluster and its endpoints.
func without(res testutils.Resources, cluster string) testutils.Resources {
	res.Clusters = slices.DeleteFunc(res.Clusters, func(c *clusterv3.Cluster) bool { return c.GetName() == cluster })
	res.Endpoints = slices.DeleteFunc(res.Endpoints, func(e *endpointv3.ClusterLoadAssignment) bool { return e.GetClusterName() == cluster })
	return res
}

// A cluster deleted (by a server marked fail_on_data_errors: gRFC A88) while
// a route still names it becomes that cluster's error, the others keep
// their ClusterConfig pointers, and its endpoints are unsubscribed; when it
// comes back, so does its entry.
func TestClusterDeleted(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry, failOnDataErrors)
		full := simpleTree("svc", "svc-route", "a", "b")
		e.update(full)
		r, _ := e.watch("svc", watchers.TreeOptions{})
		s1 := r.nextUpdate()

		// Only the cluster goes: were its endpoints deleted too, their
		// deletion could arrive first and be a snapshot of its own.
		without := simpleTree("svc", "svc-route", "a", "b")
		without.Clusters = without.Clusters[:1]
		e.update(without)
		s2 := r.nextUpdate()
		if cc := s2.Clusters.Get("b"); !errors.Is(cc.Err, client.ErrResourceNotFound) || cc.Cluster != nil {
			t.Errorf("deleted cluster b: Err = %v, Cluster %v; want ErrResourceNotFound and no cluster", cc.Err, cc.Cluster)
		}
		if s2.Clusters.Get("a") != s1.Clusters.Get("a") {
			t.Error("cluster a did not change, but its ClusterConfig is a new pointer")
		}
		e.subs.waitNames(t, edsURL, "a")
		e.subs.waitNames(t, cdsURL, "a", "b") // the route still names b

		e.update(full)
		s3 := r.nextUpdate()
		if got, want := describe(s3), describe(s1); got != want {
			t.Errorf("after b came back: %s, want %s", got, want)
		}
		e.subs.waitNames(t, edsURL, "a", "b")
		barrier(t, e.c)
		r.noMore()
	})
}

// Without fail_on_data_errors (gRFC A88) a deleted cluster is kept: the
// tree is told by an ambient error naming it, the snapshot in force stays,
// and nothing is unsubscribed.
func TestClusterDeletedKeptWithoutFailOnDataErrors(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		full := simpleTree("svc", "svc-route", "a", "b")
		e.update(full)
		r, _ := e.watch("svc", watchers.TreeOptions{})
		r.nextUpdate()

		without := simpleTree("svc", "svc-route", "a", "b")
		without.Clusters = without.Clusters[:1]
		e.update(without)
		ev := r.next()
		if !errors.Is(ev.ambErr, client.ErrResourceNotFound) || !strings.Contains(ev.ambErr.Error(), `"b"`) {
			t.Fatalf("got %v after cluster b's deletion, want an AmbientError naming b", ev)
		}
		e.subs.waitNames(t, edsURL, "a", "b")
		barrier(t, e.c)
		r.noMore()
	})
}

// The listener or route config going away (from a server marked
// fail_on_data_errors: gRFC A88) breaks the tree, and every subscription
// below the listener is dropped; its return restores it.
func TestListenerDeletedAndBack(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry, failOnDataErrors)
		full := simpleTree("svc", "svc-route", "a")
		e.update(full)
		r, _ := e.watch("svc", watchers.TreeOptions{})
		s1 := r.nextUpdate()

		rest := full
		rest.Listeners = nil
		e.update(rest)
		if err := r.nextResourceError(); !errors.Is(err, client.ErrResourceNotFound) {
			t.Errorf("ResourceError(%v), want ErrResourceNotFound", err)
		}
		e.subs.waitNames(t, rdsURL)
		e.subs.waitNames(t, cdsURL)
		e.subs.waitNames(t, edsURL)

		e.update(full)
		// Same content as before the error, delivered again: the
		// consumer was told the old one is gone.
		if got, want := describe(r.nextUpdate()), describe(s1); got != want {
			t.Errorf("after the listener came back: %s, want %s", got, want)
		}
		barrier(t, e.c)
		r.noMore()
	})
}

// A rejected update leaves the snapshot in force and is reported as an
// AmbientError; the next good version is a new snapshot.
func TestRejectedUpdate(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		good := simpleTree("svc", "svc-route", "a")
		e.update(good)
		r, _ := e.watch("svc", watchers.TreeOptions{})
		r.nextUpdate()

		bad := simpleTree("svc", "svc-route", "a")
		bad.Clusters[0].ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
		e.update(bad)
		ev := r.next()
		if ev.ambErr == nil || !errors.Is(ev.ambErr, client.ErrResourceInvalid) {
			t.Fatalf("got %v, want AmbientError wrapping ErrResourceInvalid", ev)
		}

		fixed := simpleTree("svc", "svc-route", "a")
		fixed.Endpoints = []*endpointv3.ClusterLoadAssignment{testutils.ClusterLoadAssignment("a", "127.0.0.2", 9090)}
		e.update(fixed)
		// The cluster and its endpoints may come in two responses, and so
		// in two snapshots.
		want := "svc/svc-route a:eds(a)[127.0.0.2:9090]"
		r.waitUpdate(want, func(s *watchers.Snapshot) bool { return describe(s) == want })
	})
}

// Cancelling the tree drops every subscription it made, and no callback
// follows, even when cancel is called from inside Update.
func TestCancelReleasesEverything(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		e.update(fullTree())
		r := newRecorder(t)
		var cancel func()
		ready := make(chan struct{}) // cancel is set
		cancel = watchers.WatchConfigTree(e.c, "svc", watchers.TreeOptions{}, watchers.TreeWatcherFuncs{
			OnUpdate: func(s *watchers.Snapshot) {
				r.Update(s)
				<-ready
				cancel() // from inside a callback: must not deadlock
			},
			OnResourceError: r.ResourceError,
			OnAmbientError:  r.AmbientError,
		})
		close(ready)
		if got := describe(r.nextUpdate()); got != fullTreeDesc {
			t.Errorf("snapshot %s, want %s", got, fullTreeDesc)
		}
		for _, typ := range allTypes {
			e.subs.waitNames(t, typ)
		}
		cancel() // idempotent
		res := fullTree()
		res.Endpoints[0] = testutils.ClusterLoadAssignment("a", "10.0.0.9", 80)
		e.update(res)
		barrier(t, e.c)
		r.noMore()
	})
}

// A tree's callback may close the client, as client.Client.Close allows:
// Close returns there without waiting for the callback that called it, no
// callback of the tree follows, and a Close from outside then returns too
// (goleak checks at the end that the client's goroutines are gone).
func TestCloseFromCallback(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		e.update(fullTree())
		closed := make(chan struct{})
		var calls atomic.Int32
		cancel := watchers.WatchConfigTree(e.c, "svc", watchers.TreeOptions{}, watchers.TreeWatcherFuncs{
			OnUpdate: func(*watchers.Snapshot) {
				if calls.Add(1) == 1 {
					e.c.Close()
					close(closed)
				}
			},
			OnResourceError: func(error) { calls.Add(1) },
			OnAmbientError:  func(error) { calls.Add(1) },
		})
		defer cancel()
		select {
		case <-closed:
		case <-time.After(testTimeout):
			t.Fatal("client.Close called from the tree's Update did not return")
		}
		e.c.Close() // waits for the callback to end
		if n := calls.Load(); n != 1 {
			t.Errorf("%d callbacks; want the Update that closed the client, and none after", n)
		}
	})
}

// A nil client is bad input, not a crash: the tree's watcher is told so,
// as client.New(nil, …) returns an error, and cancel is harmless.
func TestNilClient(t *testing.T) {
	t.Parallel()
	errs := make(chan error, 1)
	cancel := watchers.WatchConfigTree(nil, "svc", watchers.TreeOptions{}, watchers.TreeWatcherFuncs{
		OnUpdate:        func(*watchers.Snapshot) { t.Error("Update from a tree of a nil client") },
		OnResourceError: func(err error) { errs <- err },
		OnAmbientError:  func(err error) { t.Errorf("AmbientError(%v) from a tree of a nil client", err) },
	})
	defer cancel()
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "nil *client.Client") || !strings.Contains(err.Error(), `"svc"`) {
			t.Errorf("ResourceError(%v); want it to name the nil client and the listener", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("no ResourceError from a tree of a nil client")
	}
	cancel()
}
