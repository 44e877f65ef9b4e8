package client

import (
	"slices"
	"strings"
	"testing"
)

func TestCanonicalName(t *testing.T) {
	const pre = "xdstp://auth/envoy.config.cluster.v3.Cluster/"
	for _, tc := range []struct{ in, want string }{
		{"plain-name", "plain-name"},
		{"C1?b=2&a=1", "C1?b=2&a=1"}, // not xdstp: opaque
		{pre + "c1", pre + "c1"},
		{pre + "c1?", pre + "c1"},
		{pre + "c1?b=2&a=1", pre + "c1?a=1&b=2"},
		{pre + "c1?a=1&b=2", pre + "c1?a=1&b=2"},
		{pre + "c1?a=1&&b=2&", pre + "c1?a=1&b=2"},
		{pre + "c1?a=1&a=2", pre + "c1?a=2"}, // the last value wins (A47)
		{pre + "c1?a", pre + "c1?a="},
		{pre + "c1?x=%2f&y=%7e", pre + "c1?x=%2F&y=~"}, // hex upper case; unreserved decoded
		{pre + "c%31", pre + "c1"},                     // unreserved in the id
		{pre + "a%2Fb", pre + "a%2Fb"},                 // reserved stays encoded
		{pre + "a/b", pre + "a/b"},                     // and plain stays plain
		{pre + "c 1?k=v w", pre + "c%201?k=v%20w"},     // not allowed: encoded
		{pre + "c1?k=a+b", pre + "c1?k=a+b"},           // "+" is not a space
		{pre + "c1?%62=1&a=2", pre + "c1?a=2&b=1"},     // keys compared decoded
		{"xdstp:///envoy.config.cluster.v3.Cluster/c1", "xdstp:///envoy.config.cluster.v3.Cluster/c1"}, // empty authority
		{"xdstp://a%2eb/T/c1", "xdstp://a.b/T/c1"},
		{pre + "glob/*?z=1&y=2", pre + "glob/*?y=2&z=1"},
	} {
		got, err := canonicalName(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("canonicalName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if again, err := canonicalName(got); err != nil || again != got {
			t.Errorf("canonicalName(%q) = %q, %v; canonical names must be fixed points", got, again, err)
		}
	}
}

func TestCanonicalNameInvalid(t *testing.T) {
	for _, tc := range []struct{ in, mention string }{
		{"xdstp:auth/T/c1", "xdstp://"},
		{"xdstp://auth", "no resource type"},
		{"xdstp://auth//c1", "empty resource type"},
		{"xdstp://auth/T", `no resource id after the resource type "T"`},
		{"xdstp://auth/T/", "no resource id"},
		{"xdstp://auth/T/c1#alt=xdstp://x/T/c2", "processing directive"},
		{"xdstp://auth/T/c%zz", `malformed percent-encoding "%zz"`},
		{"xdstp://auth/T/c1?a=%4", `malformed percent-encoding "%4"`},
		{"xdstp://auth/T/c1?=v", "has no key"},
	} {
		got, err := canonicalName(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("canonicalName(%q) = %q, %v; want an error mentioning %q", tc.in, got, err, tc.mention)
		}
		if canonicalReceived(tc.in) != tc.in {
			t.Errorf("canonicalReceived(%q) changed an invalid name", tc.in)
		}
	}
}

// A canonical name is returned as it is, not copied: the names of a SotW
// response of 10,000 clusters are canonicalised on every response.
func TestCanonicalNameDoesNotAllocateWhenCanonical(t *testing.T) {
	name := "xdstp://auth/envoy.config.cluster.v3.Cluster/ns/c1"
	if n := testing.AllocsPerRun(100, func() { _, _ = canonicalName(name) }); n != 0 {
		t.Errorf("canonicalName of a canonical name allocates %v times", n)
	}
}

// FuzzCanonicalName: nothing panics; a canonical name is a fixed point; and
// the order of distinct context parameters does not matter. The seed corpus
// is in testdata/fuzz/FuzzCanonicalName.
func FuzzCanonicalName(f *testing.F) {
	f.Add("xdstp://auth/envoy.config.cluster.v3.Cluster/c1?b=2&a=1")
	f.Fuzz(func(t *testing.T, name string) {
		got, err := canonicalName(name)
		if err != nil {
			if canonicalReceived(name) != name {
				t.Fatalf("canonicalReceived changed %q, which canonicalName refuses", name)
			}
			return
		}
		if !strings.HasPrefix(name, xdstpScheme) {
			if got != name {
				t.Fatalf("an old-style name %q became %q", name, got)
			}
			return
		}
		if again, err := canonicalName(got); err != nil || again != got {
			t.Fatalf("canonicalName(%q) = %q; of that, %q, %v", name, got, again, err)
		}
		path, query, ok := strings.Cut(name, "?")
		if !ok {
			return
		}
		var segs []string
		for s := range strings.SplitSeq(query, "&") {
			if s != "" {
				segs = append(segs, s)
			}
		}
		_, gotQuery, _ := strings.Cut(got, "?")
		if len(segs) == 0 || len(segs) != len(strings.Split(gotQuery, "&")) {
			return // a key given twice: order decides which value stays
		}
		slices.Reverse(segs)
		reversed, err := canonicalName(path + "?" + strings.Join(segs, "&"))
		if err != nil || reversed != got {
			t.Fatalf("parameters of %q reversed give %q, %v; want %q", name, reversed, err, got)
		}
	})
}
