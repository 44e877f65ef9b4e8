package test

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// gRFC A88's data errors (NACKs, deletions of Listeners and Clusters), with
// and without fail_on_data_errors; its server-reported errors are in
// resource_errors_test.go.

// Delta: a Cluster in removed_resources is kept without
// fail_on_data_errors (an ambient error, told once; DOES_NOT_EXIST with the
// value), dropped with it; endpoints removed are deleted either way.
func TestDeltaRemovalOfHeldResource(t *testing.T) {
	forEachProtocol(t, deltaProtocols, func(t *testing.T, delta protocol) {
		for _, fail := range []bool{false, true} {
			t.Run(map[bool]string{false: "default", true: "fail_on_data_errors"}[fail], func(t *testing.T) {
				var cfg config
				if fail {
					cfg.features = []string{bootstrap.FeatureFailOnDataErrors}
				}
				e, w := deltaClusterEnv(t, delta, cfg)
				we := newRecorder[*resources.Endpoints]()
				client.WatchEndpoints(e.c, "E1", we)
				wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{Node: delta.nodeOfNewType(), TypeUrl: edsURL, ResourceNamesSubscribe: []string{"E1"}})
				e.sendDelta(deltaResp("d1", nil, res("C1", "v1", testutils.Cluster("C1", "E1"))))
				wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d1"})
				w.wantUpdate(t, "C1")
				e.sendDelta(testutils.DeltaResponse(edsURL, "e1", nil, res("E1", "v1", testutils.ClusterLoadAssignment("E1", "10.0.0.1", 80))))
				wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResponseNonce: "e1"})
				we.wantUpdate(t, "E1")

				e.sendDelta(deltaResp("d2", []string{"C1"}))
				wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d2"})
				e.sendDelta(testutils.DeltaResponse(edsURL, "e2", []string{"E1"}))
				wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResponseNonce: "e2"})
				we.wantNotFound(t, "E1")
				st, _ := status(e.c, cdsURL, "C1")
				if fail {
					w.wantNotFound(t, "C1")
					if st.Status != client.StatusDoesNotExist || st.Value != nil {
						t.Fatalf("C1 removed, fail_on_data_errors: %+v, want DOES_NOT_EXIST without a value", st)
					}
					return
				}
				w.wantError(t, "ambient-error", client.ErrResourceNotFound, "C1")
				if st.Status != client.StatusDoesNotExist || st.Value == nil || st.Version != "v1" {
					t.Fatalf("C1 removed: %+v, want DOES_NOT_EXIST keeping v1", st)
				}
				// Removed again: told once.
				e.sendDelta(deltaResp("d3", []string{"C1"}))
				wantReq(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "d3"})
				barrier(t, e.c)
				w.none(t)
			})
		}
	})
}

// With fail_on_data_errors a NACK drops the value held (gRFC A88): the
// watcher gets a resource error, the dump has no value, a new watcher a
// resource error; the NACK itself is as always (the accepted version). A
// valid version is delivered again.
func TestNACKWithFailOnDataErrorsDropsValue(t *testing.T) {
	forEachProtocol(t, everyProtocol, func(t *testing.T, p protocol) {
		t.Parallel()
		e := newFakeEnv(t, p, config{features: []string{bootstrap.FeatureFailOnDataErrors}})
		w := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, "C1", w)
		e.reply(p)
		e.respond(p, cdsURL, "n1", res("C1", "1", testutils.Cluster("C1", "")))
		e.reply(p)
		w.wantUpdate(t, "C1")

		e.respond(p, cdsURL, "n2", res("C1", "2", badCluster("C1")))
		if p.delta {
			wantNACK(t, e.deltaReq(), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL, ResponseNonce: "n2"}, `"C1"`)
		} else {
			wantNACK(t, e.req(), &discoveryv3.DiscoveryRequest{TypeUrl: cdsURL, VersionInfo: "vn1", ResourceNames: []string{"C1"}, ResponseNonce: "n2"}, `"C1"`)
		}
		w.wantError(t, "resource-error", client.ErrResourceInvalid, "C1")
		if st, _ := status(e.c, cdsURL, "C1"); st.Status != client.StatusNACKed || st.Value != nil {
			t.Fatalf("dump after the NACK: %+v, want NACKED without a value", st)
		}
		late := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, "C1", late)
		late.wantError(t, "resource-error", client.ErrResourceInvalid, "C1")

		e.respond(p, cdsURL, "n3", res("C1", "3", testutils.Cluster("C1", "")))
		e.reply(p)
		w.wantUpdate(t, "C1")
		late.wantUpdate(t, "C1")
	})
}
