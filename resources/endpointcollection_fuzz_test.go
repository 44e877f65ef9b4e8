package resources

import (
	"net"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
)

// FuzzEndpointCollections decodes an assignment with gRFC A95 on and a
// collection, and puts the collection in every locality naming one: it
// must never panic, and what it accepts must keep an assignment's
// promises (every address once and well formed, weights above 0, names
// that are not globs). Its seed corpus is in
// testdata/fuzz/FuzzEndpointCollections.
func FuzzEndpointCollections(f *testing.F) {
	f.Fuzz(func(t *testing.T, eds, coll []byte) {
		_, c, cerr := EndpointCollectionType.DecodeTyped(nil, &anypb.Any{TypeUrl: EndpointCollectionTypeURL, Value: coll})
		if cerr == nil {
			checkUnique(t, c.Endpoints, map[string]bool{})
		}
		_, e, err := EndpointsType.DecodeTyped(a95, &anypb.Any{TypeUrl: EndpointsTypeURL, Value: eds})
		if err != nil {
			return
		}
		for _, l := range e.Localities {
			if n := l.EndpointCollection; n != "" && (l.Endpoints != nil || len(n) >= 2 && n[len(n)-2:] == "/*") {
				t.Fatalf("locality %+v: a collection with endpoints, or a glob", l)
			}
		}
		got := e.WithCollections(func(string) *EndpointCollection {
			if cerr != nil {
				return nil
			}
			return c
		})
		seen := map[string]bool{}
		for _, l := range got.Localities {
			checkUnique(t, l.Endpoints, seen)
		}
	})
}

// checkUnique fails t if an endpoint of eps is malformed or has an address
// in seen, which it extends.
func checkUnique(t *testing.T, eps []Endpoint, seen map[string]bool) {
	t.Helper()
	for _, ep := range eps {
		if ep.Weight == 0 || len(ep.Addresses) == 0 {
			t.Fatalf("bad endpoint %+v", ep)
		}
		for _, a := range ep.Addresses {
			if seen[a] {
				t.Fatalf("address %s twice", a)
			}
			seen[a] = true
			if _, _, err := net.SplitHostPort(a); err != nil {
				t.Fatalf("address %q: %v", a, err)
			}
		}
	}
}
