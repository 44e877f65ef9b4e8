package httpxds_test

import (
	"fmt"
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func hdr(k, v string, a corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: a}
}

// TestHeaderMutations: request and response headers to add and remove, of
// the route, its virtual host and its route configuration, applied in
// Envoy's order (the route's, then the virtual host's, then the route
// configuration's; each level removes then adds; append actions as
// Envoy's HeaderValueOption;
// https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_conn_man/headers#custom-request-response-headers),
// to the handler's request and response and to a direct_response; host and
// pseudo-headers are left alone.
func TestHeaderMutations(t *testing.T) {
	const (
		appendOrAdd = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
		ifAbsent    = corev3.HeaderValueOption_ADD_IF_ABSENT
		overwrite   = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		ifExists    = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS
	)
	e := newEnv(t, envOptions{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Handler", "h")
		w.Header().Set("X-Drop", "d")
		fmt.Fprintf(w, "a=%q b=%q c=%q secret=%q host=%q", r.Header.Values("X-A"), r.Header.Values("X-B"), r.Header.Values("X-C"),
			r.Header.Values("X-Secret"), r.Host)
	})})
	rt := serveRoute(prefix("/"))
	rt.RequestHeadersToAdd = []*corev3.HeaderValueOption{
		hdr("x-a", "route", appendOrAdd),
		hdr("x-b", "route", ifAbsent),
		hdr("host", "evil.test", overwrite),
		{Header: &corev3.HeaderValue{Key: "x-c", Value: "route"}, Append: wrapperspb.Bool(false)},
	}
	rt.ResponseHeadersToAdd = []*corev3.HeaderValueOption{hdr("x-route", "r", appendOrAdd), hdr("x-handler", "route", ifExists)}
	rt.ResponseHeadersToRemove = []string{"x-drop"}
	direct := directRoute(prefix("/direct"), 202, "direct")
	direct.ResponseHeadersToAdd = []*corev3.HeaderValueOption{hdr("x-route", "d", appendOrAdd)}
	rc := routes("rc", direct, rt)
	rc.VirtualHosts[0].RequestHeadersToAdd = []*corev3.HeaderValueOption{hdr("x-a", "vh", appendOrAdd), hdr("x-c", "vh", ifExists)}
	rc.VirtualHosts[0].RequestHeadersToRemove = []string{"x-secret"}
	rc.ResponseHeadersToAdd = []*corev3.HeaderValueOption{hdr("x-route", "rc", overwrite)}
	e.serve(e.listener(rc, "", nil))

	got := e.get("/x", "X-A: client", "X-B: client", "X-C: client", "X-Secret: s")
	e.want(got, http.StatusOK, `a=["client" "route" "vh"] b=["client"] c=["vh"] secret=[] host="svc.test"`)
	if v := got.header.Values("X-Route"); len(v) != 1 || v[0] != "rc" {
		t.Errorf("X-Route = %q, want the route configuration's overwrite [rc]", v)
	}
	if got.header.Get("X-Handler") != "route" || got.header.Get("X-Drop") != "" {
		t.Errorf("X-Handler %q, X-Drop %q: want route's overwrite and the header removed", got.header.Get("X-Handler"), got.header.Get("X-Drop"))
	}
	d := e.get("/direct")
	if d.status != http.StatusAccepted || d.header.Get("X-Route") != "rc" {
		t.Errorf("direct_response: %d X-Route %q, want 202 with the route configuration's header", d.status, d.header.Get("X-Route"))
	}
	// most_specific_header_mutations_wins: the route's level is applied last.
	rc.MostSpecificHeaderMutationsWins = true
	rc.Name = "rc2"
	e2 := newEnv(t, envOptions{})
	e2.serve(e2.listener(rc, "", nil))
	if v := e2.get("/direct").header.Values("X-Route"); len(v) != 2 || v[0] != "rc" || v[1] != "d" {
		t.Errorf("with most_specific_header_mutations_wins, X-Route = %q, want [rc d]", v)
	}
}
