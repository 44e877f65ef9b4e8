package test

import (
	"errors"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// xdstp:// names are compared in canonical form (gRFC A47; PROTOCOL.md,
// "Several servers, authorities and names"): context parameters sorted by
// key, percent-encoding normalised. The client canonicalises a name when it
// is watched, which is the spelling the server is sent, and when it is
// received.

const (
	xdstpPrefix = "xdstp://auth/envoy.config.cluster.v3.Cluster/"
	canonicalC1 = xdstpPrefix + "c1?a=1&b=2"
	scrambledC1 = xdstpPrefix + "c%31?b=2&a=1"
)

// newNamesEnv is a client of a fake server that also serves authority
// "auth".
func newNamesEnv(t *testing.T, p protocol) *fakeEnv {
	t.Helper()
	fs := startFake(t, "")
	c := newClient(t, fs.Address(), p, config{authorities: map[string]string{"auth": fs.Address()}})
	return &fakeEnv{t: t, fs: fs, c: c}
}

// wantSubscribed checks the first request of the stream: it names exactly
// name, which is the canonical spelling.
func (e *fakeEnv) wantSubscribed(p protocol, name string) {
	e.t.Helper()
	if p.delta {
		wantReq(e.t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{Node: wantNode, TypeUrl: cdsURL, ResourceNamesSubscribe: []string{name}})
		return
	}
	wantReq(e.t, e.req(), &discoveryv3.DiscoveryRequest{Node: wantNode, TypeUrl: cdsURL, ResourceNames: []string{name}})
}

// sendNamed sends Cluster named name (in the wrapper and in the body) at
// version, and waits for the ACK, which names canonical in SotW.
func (e *fakeEnv) sendNamed(p protocol, name, version, canonical string) {
	e.t.Helper()
	if p.delta {
		e.sendDelta(testutils.DeltaResponse(cdsURL, "n"+version, nil, res(name, version, testutils.Cluster(name, "eds-c1"))))
		wantReq(e.t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "n" + version})
		return
	}
	e.send(sotwResp(cdsURL, version, testutils.Cluster(name, "eds-c1")))
	wantReq(e.t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: version, ResourceNames: []string{canonical}, ResponseNonce: "n" + version})
}

func wantUpdateOf(t *testing.T, w *recorder[*resources.Cluster], serverName string) {
	t.Helper()
	if ev := w.next(t); ev.kind != "update" || ev.value.ResourceName() != serverName {
		t.Fatalf("got %v, want the update of %s", ev, serverName)
	}
}

// Watched in a scrambled spelling: the server is asked for the canonical
// one, and its answer in that spelling reaches the watcher.
func TestXDSTPWatchScrambledServerCanonical(t *testing.T) {
	forEachProtocol(t, everyProtocol, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newNamesEnv(t, p)
		w := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, scrambledC1, w)
		e.wantSubscribed(p, canonicalC1)
		e.sendNamed(p, canonicalC1, "1", canonicalC1)
		wantUpdateOf(t, w, canonicalC1)
		if _, ok := status(e.c, cdsURL, canonicalC1); !ok {
			t.Fatalf("the cache does not hold %s under its canonical name", canonicalC1)
		}
	})
}

// Watched in canonical spelling, answered in a scrambled one: the resource
// still reaches the watcher, and a later removal in yet another spelling
// (delta) removes it.
func TestXDSTPWatchCanonicalServerScrambled(t *testing.T) {
	forEachProtocol(t, everyProtocol, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newNamesEnv(t, p)
		w := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, canonicalC1, w)
		e.wantSubscribed(p, canonicalC1)
		e.sendNamed(p, scrambledC1, "1", canonicalC1)
		wantUpdateOf(t, w, scrambledC1)
		// A second watcher, of a third spelling, shares the entry: it gets
		// the cached value at once, and nothing new is asked of the server.
		w2 := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, xdstpPrefix+"c1?b=2&a=%31", w2)
		wantUpdateOf(t, w2, scrambledC1)
		if !p.delta {
			return
		}
		e.sendDelta(testutils.DeltaResponse(cdsURL, "n2", []string{xdstpPrefix + "%63%31?b=2&a=1&"}))
		wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "n2"})
		// The removal found the entry: its watchers are told (an ambient
		// error, the value kept: gRFC A88).
		w.wantError(t, "ambient-error", client.ErrResourceNotFound, canonicalC1)
		w2.wantError(t, "ambient-error", client.ErrResourceNotFound, canonicalC1)
	})
}

// A malformed xdstp name is refused at once with an error saying what is
// wrong, and nothing is sent for it.
func TestXDSTPInvalidNameIsRefused(t *testing.T) {
	forEachProtocol(t, everyProtocol, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newNamesEnv(t, p)
		for _, tc := range []struct{ name, mention string }{
			{xdstpPrefix + "c1#alt=x", "processing directive"},
			{xdstpPrefix + "c%zz", "malformed percent-encoding"},
			{"xdstp://auth/envoy.config.cluster.v3.Cluster", "no resource id"},
		} {
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(e.c, tc.name, w)
			ev := w.wantError(t, "resource-error", client.ErrInvalidName, tc.name)
			if !errors.Is(ev.err, client.ErrInvalidName) || !strings.Contains(ev.err.Error(), tc.mention) {
				t.Errorf("watch of %q: error %q does not mention %q", tc.name, ev.err, tc.mention)
			}
		}
		// The next request names only a valid watch's name.
		client.WatchCluster(e.c, canonicalC1, newRecorder[*resources.Cluster]())
		e.wantSubscribed(p, canonicalC1)
	})
}
