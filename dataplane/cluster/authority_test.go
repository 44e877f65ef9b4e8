package cluster

import "testing"

func TestEndpointAuthority(t *testing.T) {
	res := &Resolution{target: "backend.example:8443"}
	for _, tc := range []struct {
		name string
		spec EndpointSpec
		want string
	}{
		{"EDS hostname", EndpointSpec{Hostname: "a.example"}, "a.example"},
		{"EDS without hostname", EndpointSpec{}, ""},
		{"LOGICAL_DNS: the target, whatever the hostname", EndpointSpec{Hostname: "ignored", DNS: res}, "backend.example:8443"},
	} {
		if got := tc.spec.Authority(); got != tc.want {
			t.Errorf("%s: Authority() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Keys of different authorities differ, whatever the rest; no authority
// leaves the transport's key as it is.
func TestAuthorityKey(t *testing.T) {
	if got := AuthorityKey("", "tls|x"); got != "tls|x" {
		t.Errorf("no authority: %q, want the rest alone", got)
	}
	keys := map[string]bool{}
	for _, k := range []string{
		AuthorityKey("a", ""), AuthorityKey("b", ""), AuthorityKey("a", "tls"), AuthorityKey(`a"|b`, ""), AuthorityKey("a", `"|b`), "",
	} {
		if keys[k] {
			t.Errorf("key %q stands for two endpoints", k)
		}
		keys[k] = true
	}
}
