package resources

import (
	"errors"
	"testing"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestFieldErrorPaths(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		err  error
		path string
		text string
	}{
		{at("a", base), "a", "a: boom"},
		{at("a", fieldErrorf("", "boom")), "a", "a: boom"},
		{at("a", at("b", base)), "a.b", "a.b: boom"},
		{at("routes", at("[2]", base)), "routes[2]", "routes[2]: boom"},
		{at(index("virtual_hosts", 0), at(index("routes", 2), fieldErrorf("match", "no path specifier"))),
			"virtual_hosts[0].routes[2].match", "virtual_hosts[0].routes[2].match: no path specifier"},
		{&FieldError{Err: base}, "", "boom"},
	}
	for _, tt := range tests {
		var fe *FieldError
		if !errors.As(tt.err, &fe) || fe.Path != tt.path || tt.err.Error() != tt.text {
			t.Errorf("got path %q, text %q; want %q, %q", fe.Path, tt.err, tt.path, tt.text)
		}
	}
	if !errors.Is(at("a", base), base) {
		t.Error("FieldError does not unwrap to its cause")
	}
}

func TestDecodeErrorsWrapFieldError(t *testing.T) {
	rc := simpleRouteConfig("rc", "c")
	rc.VirtualHosts[0].Routes[0].Match.PathSpecifier = nil
	_, _, err := decodeMsg(RouteConfigType, rc)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "virtual_hosts[0].routes[0].match" || fe.Err.Error() != "no path specifier" {
		t.Fatalf("error %v: FieldError %+v", err, fe)
	}
	if got, want := err.Error(), `RouteConfiguration "rc": virtual_hosts[0].routes[0].match: no path specifier`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func TestFilterTypeURL(t *testing.T) {
	tests := []struct {
		in      *anypb.Any
		want    string
		wantErr string
	}{
		{toAny(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/a.B"}), "type.googleapis.com/a.B", ""},
		{toAny(&udpatypev1.TypedStruct{TypeUrl: "type.googleapis.com/c.D"}), "type.googleapis.com/c.D", ""},
		{&anypb.Any{TypeUrl: "type.googleapis.com/" + typedStructName, Value: []byte{0xff}}, "", "unmarshal TypedStruct"},
		{&anypb.Any{TypeUrl: "type.googleapis.com/" + udpaStructName, Value: []byte{0xff}}, "", "unmarshal TypedStruct"},
		{&anypb.Any{TypeUrl: "example.com/x.Y"}, "example.com/x.Y", ""},
		{&anypb.Any{}, "", "empty type_url"},
	}
	for _, tt := range tests {
		got, err := filterTypeURL(tt.in)
		checkErr(t, err, tt.wantErr)
		if got != tt.want {
			t.Errorf("filterTypeURL(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// A router under another URL prefix is still the router.
	h := rdsHCM("rc")
	h.HttpFilters[0].GetTypedConfig().TypeUrl = "example.com/" + routerName
	if _, _, err := decodeMsg(ListenerType, listenerWith("l", h)); err != nil {
		t.Errorf("router with a custom URL prefix: %v", err)
	}
	h.HttpFilters = []*hcmv3.HttpFilter{{Name: "r", IsOptional: true, ConfigType: &hcmv3.HttpFilter_ConfigDiscovery{}}, routerFilter()}
	if _, l, err := decodeMsg(ListenerType, listenerWith("l", h)); err != nil || len(l.HTTPFilters) != 1 {
		t.Errorf("optional ECDS filter: %v, want it left out", err)
	}
}

func TestNilValues(t *testing.T) {
	var (
		l  *Listener
		rc *RouteConfig
		c  *Cluster
		e  *Endpoints
	)
	for _, r := range []Resource{l, rc, c, e} {
		if r.ResourceName() != "" {
			t.Errorf("%T: nil value has a name", r)
		}
	}
}

func TestKindStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{PathMatchPrefix.String(), "prefix"},
		{PathMatchExact.String(), "path"},
		{PathMatchRegex.String(), "safe_regex"},
		{PathMatchKind(7).String(), "PathMatchKind(7)"},
		{HashPolicyHeader.String(), "header"},
		{HashPolicyChannelID.String(), "channel_id"},
		{HashPolicySourceIP.String(), "source_ip"},
		{HashPolicyKind(7).String(), "HashPolicyKind(7)"},
		{RouteActionUnsupported.String(), "unsupported"},
		{RouteActionNonForwarding.String(), "non_forwarding_action"},
		{RouteActionDirectResponse.String(), "direct_response"},
		{ListenerType.String(), "Listener"},
		{LocalityID{"r", "z", "s"}.String(), `{region="r" zone="z" sub_zone="s"}`},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
