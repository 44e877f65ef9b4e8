package resources

import "testing"

func vh(name string, domains ...string) *VirtualHost {
	return &VirtualHost{Name: name, Domains: domains}
}

func TestFindVirtualHost(t *testing.T) {
	all := []*VirtualHost{
		vh("universal", "*"),
		vh("prefix-short", "foo.*"),
		vh("prefix-long", "foo.bar.*"),
		vh("suffix-short", "*.com"),
		vh("suffix-long", "*.foo.com"),
		vh("exact", "www.foo.com", "api.foo.com:8443"),
	}
	tests := []struct {
		name      string
		vhs       []*VirtualHost
		authority string
		want      string // "" for no match
	}{
		{"exact beats everything", all, "www.foo.com", "exact"},
		{"exact ignores case", all, "WWW.Foo.COM", "exact"},
		{"exact with port", all, "api.foo.com:8443", "exact"},
		{"port is part of the authority", all, "www.foo.com:80", "universal"},
		{"longest suffix wins", all, "x.foo.com", "suffix-long"},
		{"suffix ignores case", all, "X.FOO.COM", "suffix-long"},
		{"shorter suffix", all, "x.bar.com", "suffix-short"},
		{"suffix beats prefix", all, "foo.bar.com", "suffix-short"},
		{"longest prefix wins", all, "foo.bar.baz", "prefix-long"},
		{"prefix ignores case", all, "FOO.BAR.baz", "prefix-long"},
		{"shorter prefix", all, "foo.baz", "prefix-short"},
		{"universal catches the rest", all, "other", "universal"},
		{"wildcard needs a character: suffix", []*VirtualHost{vh("s", "*.foo.com")}, ".foo.com", ""},
		{"wildcard needs a character: prefix", []*VirtualHost{vh("p", "foo.*")}, "foo.", ""},
		{"suffix without a dot", []*VirtualHost{vh("s", "*foo.com")}, "barfoo.com", "s"},
		{"suffix does not match the bare domain", []*VirtualHost{vh("s", "*.foo.com")}, "foo.com", ""},
		{"prefix without a dot", []*VirtualHost{vh("p", "foo*")}, "foobar", "p"},
		{"no match", []*VirtualHost{vh("a", "a.com"), vh("b", "*.b.com")}, "c.com", ""},
		{"first of equal matches wins", []*VirtualHost{vh("first", "*.foo.com"), vh("second", "*.foo.com")}, "a.foo.com", "first"},
		{"first of equal exact matches wins", []*VirtualHost{vh("first", "a.com"), vh("second", "A.com")}, "a.com", "first"},
		{"order does not beat rank", []*VirtualHost{vh("universal", "*"), vh("exact", "a.com")}, "a.com", "exact"},
		{"longer suffix later in the list", []*VirtualHost{vh("short", "*.com"), vh("long", "*.a.com")}, "x.a.com", "long"},
		{"invalid domains match nothing", []*VirtualHost{vh("bad", "a*b", "", "**"), vh("good", "*")}, "ab", "good"},
		{"nil virtual hosts are skipped", []*VirtualHost{nil, vh("a", "*")}, "x", "a"},
		{"empty list", nil, "x", ""},
		{"empty authority", all, "", "universal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FindVirtualHost(tt.vhs, tt.authority)
			switch {
			case got == nil && tt.want != "":
				t.Errorf("FindVirtualHost(%q) = nil, want %q", tt.authority, tt.want)
			case got != nil && got.Name != tt.want:
				t.Errorf("FindVirtualHost(%q) = %q, want %q", tt.authority, got.Name, tt.want)
			}
		})
	}
}

func TestFindVirtualHostDecoded(t *testing.T) {
	in := routeConfig("rc",
		vhost("fallback", []string{"*"}, prefixRoute("/", "c0")),
		vhost("svc", []string{"svc.example.com", "*.svc.example.com"}, prefixRoute("/", "c1")),
	)
	_, rc, err := decodeMsg(RouteConfigType, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := FindVirtualHost(rc.VirtualHosts, "Svc.Example.com"); got == nil || got.Name != "svc" {
		t.Errorf("got %v, want svc", got)
	}
	if got := FindVirtualHost(rc.VirtualHosts, "a.svc.example.com"); got == nil || got.Name != "svc" {
		t.Errorf("got %v, want svc", got)
	}
	if got := FindVirtualHost(rc.VirtualHosts, "example.com"); got == nil || got.Name != "fallback" {
		t.Errorf("got %v, want fallback", got)
	}
}

func TestValidateDomain(t *testing.T) {
	valid := []string{"*", "a", "a.com", "*.a.com", "*a", "a.*", "a*", "a.com:80", "[::1]:80"}
	for _, d := range valid {
		if err := validateDomain(d); err != nil {
			t.Errorf("validateDomain(%q) = %v, want nil", d, err)
		}
	}
	invalid := []string{"", "**", "*.a.*", "a*b", "a.*.com", "*a*"}
	for _, d := range invalid {
		if err := validateDomain(d); err == nil {
			t.Errorf("validateDomain(%q) = nil, want an error", d)
		}
	}
}

func BenchmarkFindVirtualHost(b *testing.B) {
	var vhs []*VirtualHost
	for i := 0; i < 100; i++ {
		vhs = append(vhs, vh("v", "svc"+string(rune('a'+i%26))+".example.com", "*.x"+string(rune('a'+i%26))+".example.com"))
	}
	vhs = append(vhs, vh("fallback", "*"))
	b.ReportAllocs()
	for b.Loop() {
		if FindVirtualHost(vhs, "Nothing.Example.com") == nil {
			b.Fatal("no match")
		}
	}
}
