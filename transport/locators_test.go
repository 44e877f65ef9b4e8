package transport_test

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

var (
	prod   = map[string]string{"env": "prod"}
	devEU  = map[string]string{"env": "dev", "region": "eu"}
	c1Prod = transport.SubscriptionKey("C1", prod)
	c1Dev  = transport.SubscriptionKey("C1", devEU)
	c2Prod = transport.SubscriptionKey("C2", prod)
)

func loc(name string, params map[string]string) *discoveryv3.ResourceLocator {
	return &discoveryv3.ResourceLocator{Name: name, DynamicParameters: params}
}

func TestSubscriptionKeyRoundTrip(t *testing.T) {
	for _, params := range []map[string]string{nil, prod, devEU, {"": ""}, {"a:1": "3:x\x00", "b": ""}} {
		key := transport.SubscriptionKey("xdstp://auth/t/id?a=1", params)
		name, got, err := transport.ParseSubscriptionKey(key)
		if err != nil || name != "xdstp://auth/t/id?a=1" || transport.KeyName(key) != name || !cmp.Equal(got, params, cmp.Comparer(func(a, b map[string]string) bool { return len(a) == len(b) && cmp.Equal(a, b) })) {
			t.Errorf("ParseSubscriptionKey(SubscriptionKey(%v)) = %q, %v, %v", params, name, got, err)
		}
	}
	if transport.SubscriptionKey("C1", map[string]string{"a": "b", "c": "d"}) != transport.SubscriptionKey("C1", map[string]string{"c": "d", "a": "b"}) {
		t.Error("equal parameter sets give different keys")
	}
	for _, bad := range []string{"C1\x00", "C1\x001:a", "C1\x00x:a1:b", "C1\x009:a1:b"} {
		if _, _, err := transport.ParseSubscriptionKey(bad); err == nil {
			t.Errorf("ParseSubscriptionKey(%q) succeeded", bad)
		}
	}
}

// SotW: every request lists every name, the names of parameterised
// subscriptions among them, and a locator for each parameterised
// subscription; a new stream sends them all again.
func TestSotWResourceLocators(t *testing.T) {
	forEachAPIType(t, sotwVariants, func(t *testing.T, sotw bootstrap.APIType) {
		e := newEnv(t, sotw, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{c2Prod, "C1", c1Prod, c1Dev}, nil)
		full := &discoveryv3.DiscoveryRequest{
			Node:             testNode,
			TypeUrl:          cdsURL,
			ResourceNames:    []string{"C1", "C2"},
			ResourceLocators: []*discoveryv3.ResourceLocator{loc("C1", devEU), loc("C1", prod), loc("C2", prod)},
		}
		want(t, e.next(), full)
		if got := (<-e.h.sent).names; !cmp.Equal(got, []string{"C1", c1Dev, c1Prod, c2Prod}) {
			t.Fatalf("OnSubscriptionsSent(%q), want the keys without the plain names they imply", got)
		}
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C1", c1Dev})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{
			TypeUrl:          cdsURL,
			ResourceNames:    []string{"C1", "C2"}, // C1{env=prod} still needs it
			ResourceLocators: []*discoveryv3.ResourceLocator{loc("C1", prod), loc("C2", prod)},
		})
		<-e.h.sent
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{c1Prod})
		want(t, e.next(), &discoveryv3.DiscoveryRequest{
			TypeUrl:          cdsURL,
			ResourceNames:    []string{"C2"},
			ResourceLocators: []*discoveryv3.ResourceLocator{loc("C2", prod)},
		})
		<-e.h.sent
		e.fs.CutStream(status.Error(codes.Unavailable, "bye"))
		want(t, e.next(), &discoveryv3.DiscoveryRequest{
			Node:             testNode,
			TypeUrl:          cdsURL,
			ResourceNames:    []string{"C2"},
			ResourceLocators: []*discoveryv3.ResourceLocator{loc("C2", prod)},
		})
	})
}

// Delta: locators are subscribed and unsubscribed as deltas; the plain name
// goes with the first subscription of a name and leaves with the last.
func TestDeltaResourceLocators(t *testing.T) {
	forEachAPIType(t, deltaVariants, func(t *testing.T, delta bootstrap.APIType) {
		e := newEnv(t, delta, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{c1Prod}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			Node:                      testNode,
			TypeUrl:                   cdsURL,
			ResourceNamesSubscribe:    []string{"C1"},
			ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("C1", prod)},
		})
		if got := (<-e.h.sent).names; !cmp.Equal(got, []string{c1Prod}) {
			t.Fatalf("OnSubscriptionsSent(%q)", got)
		}
		e.tr.UpdateSubscriptions(cdsURL, []string{c1Dev}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl:                   cdsURL,
			ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("C1", devEU)},
		})
		<-e.h.sent
		// A plain subscription of the name asks for it again: the server
		// sends it, which the new subscription needs.
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResourceNamesSubscribe: []string{"C1"}})
		<-e.h.sent
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{c1Prod})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl:                     cdsURL,
			ResourceLocatorsUnsubscribe: []*discoveryv3.ResourceLocator{loc("C1", prod)},
		})
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{c1Dev})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl:                     cdsURL,
			ResourceLocatorsUnsubscribe: []*discoveryv3.ResourceLocator{loc("C1", devEU)},
		})
		e.tr.UpdateSubscriptions(cdsURL, []string{c1Prod}, []string{"C1"})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl:                   cdsURL,
			ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("C1", prod)},
		})
		<-e.h.sent
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{c1Prod})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl:                     cdsURL,
			ResourceNamesUnsubscribe:    []string{"C1"},
			ResourceLocatorsUnsubscribe: []*discoveryv3.ResourceLocator{loc("C1", prod)},
		})
	})
}

// A new delta stream subscribes every locator again, and
// initial_resource_versions, keyed by name, carries a name's version only
// when all its subscriptions hold the same one.
func TestDeltaReconnectResendsLocators(t *testing.T) {
	forEachAPIType(t, deltaVariants, func(t *testing.T, delta bootstrap.APIType) {
		h := newHandler()
		h.versions = map[string]map[string]string{cdsURL: {c1Prod: "v1", c1Dev: "v2", c2Prod: "v5", "C2": "v5", "C3": "v9"}}
		e := newEnv(t, delta, fastOptions, h)
		e.tr.UpdateSubscriptions(cdsURL, []string{c1Prod, c1Dev, c2Prod, "C2", "C3"}, nil)
		all := &discoveryv3.DeltaDiscoveryRequest{
			Node:                      testNode,
			TypeUrl:                   cdsURL,
			ResourceNamesSubscribe:    []string{"C1", "C2", "C3"},
			ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("C1", devEU), loc("C1", prod), loc("C2", prod)},
			// C1's two subscriptions hold different versions: left out,
			// so the server sends C1 again.
			InitialResourceVersions: map[string]string{"C2": "v5", "C3": "v9"},
		}
		want(t, e.nextDelta(), all)
		e.fs.CutStream(status.Error(codes.Unavailable, "bye"))
		e.h.nextStreamErr(t)
		want(t, e.nextDelta(), all)
	})
}

// A name goes into initial_resource_versions only when every subscription
// of it holds a version, not merely when those that hold one agree: C1 at v1
// for env=prod and nothing for env=dev, or C2{env=prod} at v5 beside a
// plain C2 that holds nothing, would otherwise claim C1: v1 and C2: v5, and
// a server that honours the claim never sends what the client lacks. The
// wildcard counts as a subscription of every name: it wants the plain
// resource, so C4{env=prod} held alone does not claim C4 either.
func TestDeltaInitialVersionsNeedEverySubscription(t *testing.T) {
	c4Prod := transport.SubscriptionKey("C4", prod)
	c5Prod := transport.SubscriptionKey("C5", prod)
	forEachAPIType(t, deltaVariants, func(t *testing.T, delta bootstrap.APIType) {
		h := newHandler()
		h.versions = map[string]map[string]string{cdsURL: {c1Prod: "v1", c2Prod: "v5", "C3": "v9", c4Prod: "v4", c5Prod: "v7", "C5": "v7"}}
		e := newEnv(t, delta, fastOptions, h)
		e.tr.UpdateSubscriptions(cdsURL, []string{c1Prod, c1Dev, c2Prod, "C2", "C3", "*", c4Prod, c5Prod}, nil)
		all := &discoveryv3.DeltaDiscoveryRequest{
			Node:                      testNode,
			TypeUrl:                   cdsURL,
			ResourceNamesSubscribe:    []string{"*", "C1", "C2", "C3", "C4", "C5"},
			ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("C1", devEU), loc("C1", prod), loc("C2", prod), loc("C4", prod), loc("C5", prod)},
			// C5: its locator and, through the wildcard, its plain name
			// both hold v7.
			InitialResourceVersions: map[string]string{"C3": "v9", "C5": "v7"},
		}
		want(t, e.nextDelta(), all)
		e.fs.CutStream(status.Error(codes.Unavailable, "bye"))
		e.h.nextStreamErr(t)
		want(t, e.nextDelta(), all)
	})
}

// removed_resource_names with constraints reach the handler as variants; a
// ResourceName without constraints is a plain removal.
func TestDeltaRemovedResourceNames(t *testing.T) {
	e := newEnv(t, delta, fastOptions, nil)
	e.tr.UpdateSubscriptions(cdsURL, []string{c1Prod}, nil)
	e.nextDelta()
	c := &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_Constraint{
		Constraint: &discoveryv3.DynamicParameterConstraints_SingleConstraint{Key: "env", ConstraintType: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Value{Value: "prod"}}}}
	resp := testutils.DeltaResponse(cdsURL, "n1", []string{"C0"})
	resp.RemovedResourceNames = []*discoveryv3.ResourceName{{Name: "C1", DynamicParameterConstraints: c}, {Name: "C2"}}
	e.fs.SendDelta(resp)
	r := e.h.nextResponse(t)
	if !cmp.Equal(r.Removed, []string{"C0", "C2"}) || len(r.RemovedVariants) != 1 || r.RemovedVariants[0].GetName() != "C1" {
		t.Fatalf("Removed %q, RemovedVariants %v", r.Removed, r.RemovedVariants)
	}
}

// A plain subscription that leaves while parameterised ones of its name
// stay tells the server nothing: the name is still wanted for them.
func TestDeltaPlainNameStaysForLocators(t *testing.T) {
	forEachAPIType(t, deltaVariants, func(t *testing.T, delta bootstrap.APIType) {
		e := newEnv(t, delta, fastOptions, nil)
		e.tr.UpdateSubscriptions(cdsURL, []string{"C1", c1Prod}, nil)
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			Node:                      testNode,
			TypeUrl:                   cdsURL,
			ResourceNamesSubscribe:    []string{"C1"},
			ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("C1", prod)},
		})
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C1"})
		// A request of another type: a CDS request, had one been made,
		// would go first on ADS (the sender handles types in order of first
		// use); on per-type streams, most likely.
		e.tr.UpdateSubscriptions(edsURL, []string{"E1"}, nil)
		for r := e.nextDelta(); r.GetTypeUrl() != edsURL; r = e.nextDelta() {
			t.Fatalf("request %v, want none of CDS", r)
		}
		e.tr.UpdateSubscriptions(cdsURL, nil, []string{c1Prod})
		want(t, e.nextDelta(), &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl:                     cdsURL,
			ResourceNamesUnsubscribe:    []string{"C1"},
			ResourceLocatorsUnsubscribe: []*discoveryv3.ResourceLocator{loc("C1", prod)},
		})
	})
}
