package httpxds

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/dataplane/httpfilter"
)

// A denial as Envoy answers it: a fault's gRPC status alone as 200 with
// grpc-status; a service's empty body without a content type; its own
// content type kept over the local answer's.
func TestDenialResponse(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "http://svc.test/x", nil)
	resp := denialResponse(req, &httpfilter.Denial{Code: 14, Body: httpfilter.FaultAbortBody})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Grpc-Status") != "14" {
		t.Errorf("gRPC status only: %d %v, want 200 with grpc-status 14", resp.StatusCode, resp.Header)
	}
	resp = denialResponse(req, &httpfilter.Denial{HTTPStatus: 403})
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 403 || len(b) != 0 || resp.Header.Get("Content-Type") != "" {
		t.Errorf("empty denial: %d %q %v", resp.StatusCode, b, resp.Header)
	}
	resp = denialResponse(req, &httpfilter.Denial{HTTPStatus: 401, Body: `{"error":"who"}`, Headers: []extauthz.Mutation{
		{Key: "content-type", Value: "application/json"}, {Key: "x-a", Value: "1"}, {Key: "x-a", Value: "2"}}})
	if ct := resp.Header.Values("Content-Type"); len(ct) != 1 || ct[0] != "application/json" || strings.Join(resp.Header.Values("X-A"), ",") != "1,2" {
		t.Errorf("denial with headers: %v", resp.Header)
	}
}

// What the filters started is released once, when the response body ends
// or is closed, or at once without a response; the response headers to
// add are added by their canonical names.
func TestFinishFilters(t *testing.T) {
	n := 0
	res := httpfilter.Result{Release: func() { n++ }, ResponseHeaders: []extauthz.Mutation{{Key: "x-note", Value: "checked"}}}
	resp := &http.Response{Header: http.Header{}, Body: io.NopCloser(strings.NewReader("body"))}
	finishFilters(&res, resp)
	if resp.Header.Get("X-Note") != "checked" || n != 0 {
		t.Fatalf("header %v, %d releases before the body ended", resp.Header, n)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if n != 1 {
		t.Errorf("%d releases after the body ended and closed, want 1", n)
	}
	finishFilters(&res, nil)
	if n != 2 {
		t.Errorf("no response: %d releases, want 2", n)
	}
}
