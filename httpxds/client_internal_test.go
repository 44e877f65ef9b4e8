package httpxds

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The responses the Transport makes itself are told apart from an
// endpoint's (isLocal), for the retry loop; their body reads as written.
func TestIsLocal(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "http://svc/x", nil)
	resp := localResponse(req, http.StatusServiceUnavailable, "httpxds: no healthy upstream\n", nil)
	if !isLocal(resp) {
		t.Error("a local response is not isLocal")
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "httpxds: no healthy upstream\n" || resp.ContentLength != int64(len(b)) {
		t.Errorf("body %q, length %d", b, resp.ContentLength)
	}
	upstream := &http.Response{StatusCode: 503, Body: io.NopCloser(strings.NewReader(""))}
	if isLocal(upstream) {
		t.Error("an upstream response is isLocal")
	}
}
