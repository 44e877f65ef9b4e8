package test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// manyListeners are the names the NACK-size test watches.
var manyListeners = func() []string {
	var out []string
	for i := range 500 {
		out = append(out, fmt.Sprintf("L%03d", i))
	}
	return out
}()

// listenersEnv is a client of p watching manyListeners, whose first request
// has been read.
func listenersEnv(t *testing.T, p protocol) *fakeEnv {
	t.Helper()
	e := newFakeEnv(t, p, config{})
	for _, name := range manyListeners {
		client.WatchListener(e.c, name, newRecorder[*resources.Listener]())
	}
	// The watches may reach the wire in more than one request; the names
	// are all on it once a request (SotW), or the requests together
	// (delta), hold every one. Each read has the test's deadline.
	subscribed := make(map[string]bool)
	for len(subscribed) < len(manyListeners) {
		var names []string
		if p.delta {
			names = e.deltaReq().GetResourceNamesSubscribe()
		} else {
			clear(subscribed)
			names = e.req().GetResourceNames()
		}
		for _, n := range names {
			subscribed[n] = true
		}
	}
	return e
}

// nackDetail reads the next request, checks that it is exactly the NACK of
// nonce for manyListeners but for its error_detail, and returns the
// message.
func (e *fakeEnv) nackDetail(p protocol, nonce string) string {
	e.t.Helper()
	if p.delta {
		r := e.deltaReq()
		wantNACK(e.t, r, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: ldsURL, ResponseNonce: nonce})
		return r.GetErrorDetail().GetMessage()
	}
	r := e.req()
	wantNACK(e.t, r, &discoveryv3.DiscoveryRequest{TypeUrl: ldsURL, ResourceNames: manyListeners, ResponseNonce: nonce})
	return r.GetErrorDetail().GetMessage()
}

var moreErrors = regexp.MustCompile(`; and (\d+) more errors?$`)

// checkBoundedNACK checks a NACK's message of n errors, one per listener
// of manyListeners in order: at most 4 KiB, valid UTF-8, the first errors
// whole and in order, then the count of those left out, which with those
// kept makes n.
func checkBoundedNACK(t *testing.T, msg string, n int) {
	t.Helper()
	if len(msg) > 4096 || !utf8.ValidString(msg) {
		t.Fatalf("NACK error_detail of %d bytes (valid UTF-8: %v), want at most 4096", len(msg), utf8.ValidString(msg))
	}
	head := fmt.Sprintf("%d errors: ", n)
	if !strings.HasPrefix(msg, head) {
		t.Fatalf("NACK error_detail starts %.100q, want %q", msg, head)
	}
	m := moreErrors.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("NACK error_detail ends %q, want how many more errors there were", msg[max(0, len(msg)-60):])
	}
	more, _ := strconv.Atoi(m[1])
	kept := strings.Split(strings.TrimSuffix(strings.TrimPrefix(msg, head), m[0]), "; ")
	for i, k := range kept {
		if !strings.HasPrefix(k, fmt.Sprintf("resource %q: ", manyListeners[i])) {
			t.Fatalf("error %d of the NACK reads %.100q, want the error of %s", i, k, manyListeners[i])
		}
	}
	if len(kept)+more != n {
		t.Fatalf("NACK error_detail keeps %d errors and counts %d more, want %d in all", len(kept), more, n)
	}
	t.Logf("NACK of %d errors: %d bytes, %d kept, %d counted", n, len(msg), len(kept), more)
}

// A NACK's error_detail is bounded (PROTOCOL.md, SotW rules): 500 bad
// resources, or two whose type_url is a megabyte long, make a NACK of at
// most 4 KiB that keeps the first errors whole and says how many more
// there were. Unbounded, the second NACK was 2 MiB, which a server's
// default 4 MiB receive limit takes but a third such resource would not.
func TestNACKErrorDetailIsBounded(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		e := listenersEnv(t, p)

		// Many bad resources: clusters in a listener response.
		var rs []*discoveryv3.Resource
		for _, name := range manyListeners {
			rs = append(rs, res(name, "1", testutils.Cluster(name, "")))
		}
		e.respond(p, ldsURL, "n1", rs...)
		checkBoundedNACK(t, e.nackDetail(p, "n1"), len(manyListeners))

		// Resources whose type_url is 1 MiB: the first error is cut, at a
		// rune boundary, and the other counted.
		huge := "type.googleapis.com/" + strings.Repeat("é", 1<<19)
		rs = nil
		for _, name := range manyListeners[:2] {
			r := res(name, "1", nil)
			r.Resource = &anypb.Any{TypeUrl: huge, Value: []byte{}}
			rs = append(rs, r)
		}
		e.respond(p, ldsURL, "n2", rs...)
		msg := e.nackDetail(p, "n2")
		checkBoundedNACK(t, msg, 2)
		if !strings.HasSuffix(msg, "éé… (cut); and 1 more error") {
			t.Fatalf("NACK error_detail ends %q, want the first error cut and the second counted", msg[len(msg)-60:])
		}
	})
}
