package test

import (
	"errors"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/client/csds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Dynamic parameters (PROTOCOL.md "Dynamic parameters"): watches with
// parameters are subscriptions of their own, sent as ResourceLocators
// beside the plain names; variants named by resource_name reach exactly
// the watches whose parameters their constraints match.

var (
	dpProd    = map[string]string{"env": "prod"}
	dpProdEU  = map[string]string{"env": "prod", "region": "eu"}
	dpDev     = map[string]string{"env": "dev"}
	dpStaging = map[string]string{"env": "staging"}
)

// Short names for the constraint builders.
var (
	dpValue  = testutils.ConstraintValue
	dpExists = testutils.ConstraintExists
	dpAnd    = testutils.ConstraintAnd
	dpOr     = testutils.ConstraintOr
	dpNot    = testutils.ConstraintNot
)

func locator(name string, params map[string]string) *discoveryv3.ResourceLocator {
	return &discoveryv3.ResourceLocator{Name: name, DynamicParameters: params}
}

// watchC1 watches Cluster C1 with params (nil: a plain watch).
func watchC1(c *client.Client, params map[string]string) (*recorder[*resources.Cluster], func()) {
	w := newRecorder[*resources.Cluster]()
	cancel := client.WatchWithOptions(c, resources.ClusterType, "C1", client.WatchOptions{DynamicParameters: params}, w)
	return w, cancel
}

// replyTo reads requests until the reply to the response with nonce, and
// returns it: subscription requests of the watches made before come first.
func (e *fakeEnv) replyTo(p protocol, nonce string) proto.Message {
	e.t.Helper()
	for {
		if p.delta {
			if r := e.deltaReq(); r.GetResponseNonce() == nonce {
				return r
			}
		} else if r := e.req(); r.GetResponseNonce() == nonce {
			return r
		}
	}
}

// waitLocators reads requests until the server has been told n locators of
// cdsURL (SotW: one request lists them all; delta: they add up), so that a
// response sent next finds every watch made before on the wire.
func (e *fakeEnv) waitLocators(p protocol, n int) {
	e.t.Helper()
	got := 0
	for got < n {
		if p.delta {
			got += len(e.deltaReq().GetResourceLocatorsSubscribe())
		} else {
			got = len(e.req().GetResourceLocators())
		}
	}
}

// SotW: every request lists the names, the name of each parameterised
// watch among them, and one locator per parameter set; equal sets share
// one subscription; a name stays while any watch of it does.
func TestDynamicParametersSotWRequests(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{})
		_, cancelPlain := watchC1(e.c, nil)
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{Node: wantNode, TypeUrl: cdsURL, ResourceNames: []string{"C1"}})
		_, cancelProd1 := watchC1(e.c, dpProd)
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1"},
			ResourceLocators: []*discoveryv3.ResourceLocator{locator("C1", dpProd)}})
		_, cancelProd2 := watchC1(e.c, map[string]string{"env": "prod"}) // equal set: no new subscription
		_, cancelEU := watchC1(e.c, dpProdEU)
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1"},
			ResourceLocators: []*discoveryv3.ResourceLocator{locator("C1", dpProd), locator("C1", dpProdEU)}})
		cancelPlain()
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1"},
			ResourceLocators: []*discoveryv3.ResourceLocator{locator("C1", dpProd), locator("C1", dpProdEU)}})
		cancelProd1()
		cancelProd2()
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1"},
			ResourceLocators: []*discoveryv3.ResourceLocator{locator("C1", dpProdEU)}})
		// Reconnect: the same list again, with the node.
		e.fs.CutStream(grpcstatus.Error(codes.Unavailable, "restart"))
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{Node: wantNode, TypeUrl: cdsURL, ResourceNames: []string{"C1"},
			ResourceLocators: []*discoveryv3.ResourceLocator{locator("C1", dpProdEU)}})
		cancelEU()
		wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL})
	})
}

// Delta: locators are subscribed and unsubscribed as deltas; the plain
// name goes with a name's first subscription and leaves with its last.
func TestDynamicParametersDeltaRequests(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{})
		_, cancelProd1 := watchC1(e.c, dpProd)
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{Node: wantNode, TypeUrl: cdsURL,
			ResourceNamesSubscribe: []string{"C1"}, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{locator("C1", dpProd)}})
		_, cancelProd2 := watchC1(e.c, map[string]string{"env": "prod"}) // equal set: no new subscription
		_, cancelEU := watchC1(e.c, dpProdEU)
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL,
			ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{locator("C1", dpProdEU)}})
		cancelProd1()
		cancelProd2()
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL,
			ResourceLocatorsUnsubscribe: []*discoveryv3.ResourceLocator{locator("C1", dpProd)}})
		cancelEU()
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL,
			ResourceNamesUnsubscribe: []string{"C1"}, ResourceLocatorsUnsubscribe: []*discoveryv3.ResourceLocator{locator("C1", dpProdEU)}})
	})
}

// Delta reconnect: every locator is subscribed again, and
// initial_resource_versions (keyed by name in the spec) carries a name's
// version when every subscription of it holds that version, and leaves the
// name out when they differ, so that the server sends it again.
func TestDynamicParametersDeltaReconnect(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{})
		wPlain, _ := watchC1(e.c, nil)
		wProd, _ := watchC1(e.c, dpProd)
		wDev, _ := watchC1(e.c, dpDev)
		w2 := newRecorder[*resources.Cluster]()
		client.WatchWithOptions(e.c, resources.ClusterType, "C2", client.WatchOptions{DynamicParameters: dpProd}, w2)
		e.waitLocators(p, 3)
		e.sendDelta(deltaResp("d1", nil,
			res("C1", "v1", testutils.Cluster("C1", "all")),
			testutils.WrapVariant("C2", "v7", dpValue("env", "prod"), testutils.Cluster("C2", "prod"))))
		e.replyTo(p, "d1")
		wPlain.wantUpdate(t, "C1")
		wProd.wantUpdate(t, "C1")
		wDev.wantUpdate(t, "C1")
		w2.wantUpdate(t, "C2")
		wantFirst := &discoveryv3.DeltaDiscoveryRequest{Node: wantNode, TypeUrl: cdsURL,
			ResourceNamesSubscribe:    []string{"C1", "C2"},
			ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{locator("C1", dpDev), locator("C1", dpProd), locator("C2", dpProd)},
			InitialResourceVersions:   map[string]string{"C1": "v1", "C2": "v7"},
		}
		e.fs.CutStream(grpcstatus.Error(codes.Unavailable, "restart"))
		wantReq(t, e.deltaReq(), wantFirst)

		// C1{env=dev} gets a variant of its own: C1's versions differ.
		e.sendDelta(deltaResp("d2", nil, testutils.WrapVariant("C1", "v2", dpValue("env", "dev"), testutils.Cluster("C1", "dev"))))
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d2"})
		if c := wDev.wantUpdate(t, "C1"); c.EDSServiceName() != "dev" {
			t.Fatalf("C1{env=dev} got %q", c.EDSServiceName())
		}
		e.fs.CutStream(grpcstatus.Error(codes.Unavailable, "restart"))
		wantFirst.InitialResourceVersions = map[string]string{"C2": "v7"}
		wantReq(t, e.deltaReq(), wantFirst)
	})
}

// A variant that holds nothing keeps its name out of
// initial_resource_versions: C1{env=prod} holds v1 and C1{env=dev} nothing,
// so a reconnect must not claim C1: v1, or a server that honours the claim
// never sends the dev variant and its watch waits until it is reported
// missing.
func TestDynamicParametersDeltaReconnectVariantHoldsNothing(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{})
		wProd, _ := watchC1(e.c, dpProd)
		watchC1(e.c, dpDev)
		e.waitLocators(p, 2)
		e.sendDelta(deltaResp("d1", nil, testutils.WrapVariant("C1", "v1", dpValue("env", "prod"), testutils.Cluster("C1", "prod"))))
		e.replyTo(p, "d1")
		wProd.wantUpdate(t, "C1")
		e.fs.CutStream(grpcstatus.Error(codes.Unavailable, "restart"))
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{Node: wantNode, TypeUrl: cdsURL,
			ResourceNamesSubscribe:    []string{"C1"},
			ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{locator("C1", dpDev), locator("C1", dpProd)},
		})
	})
}

// Each variant reaches exactly the watches whose parameters its
// constraints match (value, exists, and/or/not, nested); one matching none
// reaches no one; the ACK is the usual one.
func TestDynamicParametersDelivery(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{})
		wPlain, _ := watchC1(e.c, nil)
		wProd, _ := watchC1(e.c, dpProd)
		wEU, _ := watchC1(e.c, dpProdEU)
		wDev, _ := watchC1(e.c, dpDev)
		wStaging, _ := watchC1(e.c, dpStaging)
		e.waitLocators(p, 4)
		e.respond(p, cdsURL, "1",
			testutils.WrapVariant("C1", "v1", dpAnd(dpValue("env", "prod"), dpNot(dpExists("region"))), testutils.Cluster("C1", "prod")),
			testutils.WrapVariant("C1", "v1", dpAnd(dpExists("env"), dpValue("region", "eu")), testutils.Cluster("C1", "prod-eu")),
			testutils.WrapVariant("C1", "v1", dpNot(dpExists("env")), testutils.Cluster("C1", "default")),
			testutils.WrapVariant("C1", "v1", dpOr(dpValue("env", "dev"), dpValue("env", "test")), testutils.Cluster("C1", "dev")),
			testutils.WrapVariant("C1", "v1", dpValue("env", "nowhere"), testutils.Cluster("C1", "nowhere")),
		)
		if r := e.replyTo(p, "1"); proto.Equal(r, nil) || hasErrorDetail(r) {
			t.Fatalf("reply %v, want an ACK", r)
		}
		for _, c := range []struct {
			w   *recorder[*resources.Cluster]
			eds string
		}{{wPlain, "default"}, {wProd, "prod"}, {wEU, "prod-eu"}, {wDev, "dev"}} {
			if got := c.w.wantUpdate(t, "C1").EDSServiceName(); got != c.eds {
				t.Errorf("watch got variant %q, want %q", got, c.eds)
			}
		}
		barrier(t, e.c)
		for _, w := range []*recorder[*resources.Cluster]{wPlain, wProd, wEU, wDev, wStaging} {
			w.none(t)
		}
		// A watch no variant matches waits, as for a name not sent, on
		// its does-not-exist timer.
		if st, _ := statusOf(e.c, "C1", dpStaging); st.Status != client.StatusRequested {
			t.Errorf("C1{env=staging} is %v, want REQUESTED", st.Status)
		}
		// The metrics count each parameter set on its own.
		counts := map[string]int{}
		for _, rc := range e.c.ResourceCounts() {
			if rc.TypeURL == cdsURL {
				counts[rc.Authority+" "+rc.CacheState] += rc.Count
			}
		}
		if counts["#old acked"] != 4 || counts["#old requested"] != 1 || len(counts) != 2 {
			t.Errorf("resource counts %v, want 4 acked and 1 requested", counts)
		}
		// The dump and CSDS list each parameter set on its own.
		var names []string
		for _, g := range csds.ClientConfig(e.c, csds.Options{}).GetGenericXdsConfigs() {
			names = append(names, g.GetName())
		}
		want := []string{`C1`, `C1{env="dev"}`, `C1{env="prod", region="eu"}`, `C1{env="prod"}`, `C1{env="staging"}`}
		if !equalStrings(names, want) {
			t.Errorf("CSDS names %q, want %q", names, want)
		}
	})
}

// Two variants that match one watch are an error: NACKed, naming both; the
// watches they do not both match get theirs.
func TestDynamicParametersTwoMatchingVariantsNACK(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{})
		wProd, _ := watchC1(e.c, dpProd)
		wDev, _ := watchC1(e.c, dpDev)
		e.waitLocators(p, 2)
		e.respond(p, cdsURL, "1",
			testutils.WrapVariant("C1", "v1", dpValue("env", "prod"), testutils.Cluster("C1", "prod")),
			testutils.WrapVariant("C1", "v1", dpExists("env"), testutils.Cluster("C1", "any")),
		)
		r := e.replyTo(p, "1")
		mentions := []string{`"C1"`, `env="prod"`, `exists(env)`, `{env="prod"}`}
		if p.delta {
			wantNACK(t, r, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "1"}, mentions...)
		} else {
			wantNACK(t, r, &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "1", ResourceNames: []string{"C1"},
				ResourceLocators: []*discoveryv3.ResourceLocator{locator("C1", dpDev), locator("C1", dpProd)}}, mentions...)
		}
		ev := wProd.wantError(t, "resource-error", client.ErrResourceInvalid, "C1")
		var xe *client.Error
		if !strings.Contains(ev.err.Error(), `"C1" {env="prod"}: resource rejected: two variants`) || !errors.As(ev.err, &xe) || !equalParams(xe.DynamicParameters, dpProd) {
			t.Errorf("C1{env=prod} told %v, want it to say two variants match, with its parameters", ev.err)
		}
		if got := wDev.wantUpdate(t, "C1").EDSServiceName(); got != "any" {
			t.Errorf("C1{env=dev} got %q, want any", got)
		}
	})
}

// Delta removal: removed_resource_names removes the variant with those
// constraints, from the watches holding it only; a plain name removes the
// variant without constraints, and leaves constrained ones alone. (The
// server is marked fail_on_data_errors: a removal then drops what is held,
// gRFC A88.)
func TestDynamicParametersDeltaRemoval(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{features: failOnDataErrors}) // removed means dropped (gRFC A88)
		wPlain, _ := watchC1(e.c, nil)
		wProd, _ := watchC1(e.c, dpProd)
		wDev, _ := watchC1(e.c, dpDev)
		e.waitLocators(p, 2)
		e.sendDelta(deltaResp("d1", nil,
			testutils.WrapVariant("C1", "v1", dpValue("env", "prod"), testutils.Cluster("C1", "prod")),
			testutils.WrapVariant("C1", "v1", dpValue("env", "dev"), testutils.Cluster("C1", "dev"))))
		e.replyTo(p, "d1")
		wProd.wantUpdate(t, "C1")
		wDev.wantUpdate(t, "C1")

		resp := deltaResp("d2", []string{"C1"}) // plain: the variant without constraints
		resp.RemovedResourceNames = []*discoveryv3.ResourceName{{Name: "C1", DynamicParameterConstraints: dpValue("env", "prod")}}
		e.sendDelta(resp)
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d2"})
		wProd.wantNotFound(t, "C1")
		wPlain.wantNotFound(t, "C1") // held nothing: the server does not have it
		barrier(t, e.c)
		wDev.none(t)
		if st, _ := statusOf(e.c, "C1", dpDev); st.Status != client.StatusACKed {
			t.Fatalf("C1{env=dev} is %v, want ACKED", st.Status)
		}
	})
}

// SotW, whole-world types: a response's variants replace the previous
// ones; a watch no variant matches any more has lost its resource (the
// server is marked fail_on_data_errors: gRFC A88).
func TestDynamicParametersSotWVariantsReplace(t *testing.T) {
	forEachProtocol(t, sotwProtocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{features: failOnDataErrors}) // deleted means dropped (gRFC A88)
		wProd, _ := watchC1(e.c, dpProd)
		wDev, _ := watchC1(e.c, dpDev)
		e.waitLocators(p, 2)
		e.respond(p, cdsURL, "1",
			testutils.WrapVariant("C1", "v1", dpValue("env", "prod"), testutils.Cluster("C1", "prod")),
			testutils.WrapVariant("C1", "v1", dpValue("env", "dev"), testutils.Cluster("C1", "dev")))
		e.replyTo(p, "1")
		wProd.wantUpdate(t, "C1")
		wDev.wantUpdate(t, "C1")
		e.respond(p, cdsURL, "2", testutils.WrapVariant("C1", "v2", dpValue("env", "prod"), testutils.Cluster("C1", "prod2")))
		e.replyTo(p, "2")
		if got := wProd.wantUpdate(t, "C1").EDSServiceName(); got != "prod2" {
			t.Fatalf("C1{env=prod} got %q", got)
		}
		wDev.wantNotFound(t, "C1")
	})
}

// Client-wide parameters go on every watch, under the watch's own.
func TestDynamicParametersClientDefaults(t *testing.T) {
	t.Parallel()
	fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Stop)
	b, err := bootstrapFor(fs.Address(), sotw, config{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(b, client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: testLogger(),
		DynamicParameters: map[string]string{"env": "prod", "region": "us"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &fakeEnv{t: t, fs: fs, c: c}
	client.WatchCluster(c, "C1", newRecorder[*resources.Cluster]())
	wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{Node: wantNode, TypeUrl: cdsURL, ResourceNames: []string{"C1"},
		ResourceLocators: []*discoveryv3.ResourceLocator{locator("C1", map[string]string{"env": "prod", "region": "us"})}})
	watchC1(c, map[string]string{"region": "eu"})
	wantReq(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, ResourceNames: []string{"C1"},
		ResourceLocators: []*discoveryv3.ResourceLocator{
			locator("C1", map[string]string{"env": "prod", "region": "eu"}),
			locator("C1", map[string]string{"env": "prod", "region": "us"}),
		}})
}

func hasErrorDetail(m proto.Message) bool {
	switch r := m.(type) {
	case *discoveryv3.DiscoveryRequest:
		return r.GetErrorDetail() != nil
	case *discoveryv3.DeltaDiscoveryRequest:
		return r.GetErrorDetail() != nil
	}
	return false
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// statusOf returns the dump's entry for Cluster name watched with params.
func statusOf(c *client.Client, name string, params map[string]string) (client.ResourceStatus, bool) {
	for _, st := range c.Dump() {
		if st.TypeURL == cdsURL && st.Name == name && equalParams(st.DynamicParameters, params) {
			return st, true
		}
	}
	return client.ResourceStatus{}, false
}

func equalParams(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A server's error for a variant (resource_errors with constraints, gRFC
// A88) concerns the watches the constraints match; one without
// constraints, every watch of the name.
func TestDynamicParametersResourceErrors(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{})
		wPlain, _ := watchC1(e.c, nil)
		wProd, _ := watchC1(e.c, dpProd)
		wDev, _ := watchC1(e.c, dpDev)
		e.waitLocators(p, 2)
		errs := []*discoveryv3.ResourceError{{
			ResourceName: &discoveryv3.ResourceName{Name: "C1", DynamicParameterConstraints: dpValue("env", "prod")},
			ErrorDetail:  &statuspb.Status{Code: int32(codes.PermissionDenied), Message: "not for you"},
		}}
		if p.delta {
			r := deltaResp("1", nil)
			r.ResourceErrors = errs
			e.sendDelta(r)
		} else {
			e.send(&discoveryv3.DiscoveryResponse{TypeUrl: cdsURL, VersionInfo: "v1", Nonce: "1", ResourceErrors: errs})
		}
		e.replyTo(p, "1")
		wProd.wantError(t, "resource-error", client.ErrReportedByServer, "C1")
		barrier(t, e.c)
		wPlain.none(t)
		wDev.none(t)

		errs[0].ResourceName.DynamicParameterConstraints = nil
		if p.delta {
			r := deltaResp("2", nil)
			r.ResourceErrors = errs
			e.sendDelta(r)
		} else {
			e.send(&discoveryv3.DiscoveryResponse{TypeUrl: cdsURL, VersionInfo: "v2", Nonce: "2", ResourceErrors: errs})
		}
		e.replyTo(p, "2")
		wPlain.wantError(t, "resource-error", client.ErrReportedByServer, "C1")
		wDev.wantError(t, "resource-error", client.ErrReportedByServer, "C1")
		barrier(t, e.c)
		wProd.none(t) // told already: the same error is not repeated
	})
}

// Stock go-control-plane ignores locators: it serves the plain names beside
// them, so a watch with parameters gets the resource without constraints,
// and keeps getting it once the plain watch of the name is gone.
func TestE2EDynamicParametersServerIgnoresLocators(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		e := newE2E(t, v, config{}, testutils.ManagementServerOptions{}, svc(1001))
		plain := newRecorder[*resources.Endpoints]()
		cancelPlain := client.WatchEndpoints(e.c, "svc-cluster", plain)
		prod := newRecorder[*resources.Endpoints]()
		client.WatchWithOptions(e.c, resources.EndpointsType, "svc-cluster", client.WatchOptions{DynamicParameters: dpProd}, prod)
		wantAddresses(t, plain.wantUpdate(t, "svc-cluster"), "127.0.0.1:1001")
		wantAddresses(t, prod.wantUpdate(t, "svc-cluster"), "127.0.0.1:1001")
		cancelPlain()
		e.update(svc(1002))
		wantAddresses(t, prod.wantUpdatePastOutage(t, "svc-cluster"), "127.0.0.1:1002")
	})
}

// A delta server sends a resource once per stream, and one that ignores
// locators never sends it again for a later watch of the name with
// parameters: the variant the client already holds from that server, which
// matches, is that watch's at once (and the locator still goes out, for a
// server that reads it to answer with its own choice).
func TestDynamicParametersLaterWatchGetsHeldVariant(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e, wPlain := deltaClusterEnv(t, p, config{})
		e.sendDelta(deltaResp("d1", nil, res("C1", "v1", testutils.Cluster("C1", "plain"))))
		e.replyTo(p, "d1")
		wPlain.wantUpdate(t, "C1")

		wProd, _ := watchC1(e.c, dpProd)
		wProd.wantUpdate(t, "C1")
		e.waitLocators(p, 1)
		st, _ := statusOf(e.c, "C1", dpProd)
		if st.Status != client.StatusACKed || st.Version != "v1" {
			t.Fatalf("C1{env=prod} is %v at %q, want ACKED at v1", st.Status, st.Version)
		}
		// A variant for prod from a server that reads locators replaces it.
		e.sendDelta(deltaResp("d2", nil, testutils.WrapVariant("C1", "v2", dpValue("env", "prod"), testutils.Cluster("C1", "prod"))))
		e.replyTo(p, "d2")
		if got := wProd.wantUpdate(t, "C1"); got.EDSServiceName() != "prod" {
			t.Errorf("C1{env=prod} after its variant arrived: eds %q, want prod", got.EDSServiceName())
		}
		barrier(t, e.c)
		wPlain.none(t)
	})
}
