package resources

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestServerListenerPathNormalization: a server chain keeps its connection
// manager's normalize_path (unset told from false), merge_slashes and
// path_with_escaped_slashes_action, which an HTTP server applies before
// routing and RBAC; an action the proto does not define is NACKed, naming
// the field.
func TestServerListenerPathNormalization(t *testing.T) {
	decode := func(h *hcmv3.HttpConnectionManager) (*FilterChain, error) {
		_, l, err := decodeMsg(ListenerType, serverListener(hcmChain(h)))
		if err != nil {
			return nil, err
		}
		return l.Server.FilterChains[0], nil
	}
	fc, err := decode(serverHCM())
	if err != nil {
		t.Fatal(err)
	}
	if p := fc.PathNormalization; p.NormalizePath != nil || p.MergeSlashes || p.EscapedSlashes != EscapedSlashesDefault {
		t.Errorf("unset fields gave %+v, want the zero value", p)
	}
	h := serverHCM()
	h.NormalizePath = wrapperspb.Bool(false)
	h.MergeSlashes = true
	h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT
	if fc, err = decode(h); err != nil {
		t.Fatal(err)
	}
	p := fc.PathNormalization
	if p.NormalizePath == nil || *p.NormalizePath || !p.MergeSlashes || p.EscapedSlashes != EscapedSlashesUnescapeAndRedirect {
		t.Errorf("got %+v (normalize %v), want normalize_path false, merge_slashes, UNESCAPE_AND_REDIRECT", p, p.NormalizePath)
	}
	if got := p.EscapedSlashes.String(); got != "UNESCAPE_AND_REDIRECT" {
		t.Errorf("String() = %q", got)
	}
	h.PathWithEscapedSlashesAction = 42
	_, err = decode(h)
	checkErr(t, err, "filter_chains[0].filters[0].typed_config.path_with_escaped_slashes_action: unknown value 42")
}

func hcmChain(h *hcmv3.HttpConnectionManager) *listenerv3.FilterChain {
	fc := chain("c", nil)
	fc.Filters[0] = hcmFilter("hcm", h)
	return fc
}

// TestServerListenerStripHostPort: a server chain keeps its connection
// manager's strip_matching_host_port or strip_any_host_port; both set is
// NACKed naming them, as Envoy allows only one
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto,
// strip_matching_host_port: "Only one of strip_matching_host_port or
// strip_any_host_port can be set").
func TestServerListenerStripHostPort(t *testing.T) {
	decode := func(h *hcmv3.HttpConnectionManager) (*FilterChain, error) {
		_, l, err := decodeMsg(ListenerType, serverListener(hcmChain(h)))
		if err != nil {
			return nil, err
		}
		return l.Server.FilterChains[0], nil
	}
	h := serverHCM()
	for _, tc := range []struct {
		matching, any bool
		want          HostPortStrip
	}{{false, false, HostPortKeep}, {true, false, HostPortStripMatching}, {false, true, HostPortStripAny}} {
		h.StripMatchingHostPort = tc.matching
		h.StripPortMode = &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: tc.any}
		fc, err := decode(h)
		if err != nil {
			t.Fatal(err)
		}
		if fc.StripHostPort != tc.want {
			t.Errorf("matching %v, any %v: got %v, want %v", tc.matching, tc.any, fc.StripHostPort, tc.want)
		}
	}
	h.StripMatchingHostPort = true
	h.StripPortMode = &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true}
	_, err := decode(h)
	checkErr(t, err, "filter_chains[0].filters[0].typed_config.strip_any_host_port: must not be set with strip_matching_host_port (only one of them can be)")
}

// TestHostRules: strip_trailing_host_dot is kept for a server chain and a
// client Listener, and a client Listener keeps its port stripping too
// (both port fields set is not refused there, as grpc-go accepts it:
// strip_any_host_port wins), for an HTTP client (package httpxds).
func TestHostRules(t *testing.T) {
	h := serverHCM()
	h.StripTrailingHostDot = true
	_, l, err := decodeMsg(ListenerType, serverListener(hcmChain(h)))
	if err != nil {
		t.Fatal(err)
	}
	if !l.Server.FilterChains[0].StripTrailingHostDot {
		t.Error("server chain: strip_trailing_host_dot not kept")
	}
	for _, tc := range []struct {
		matching, any, dot bool
		want               HostPortStrip
	}{
		{false, false, false, HostPortKeep},
		{false, false, true, HostPortKeep},
		{true, false, false, HostPortStripMatching},
		{false, true, true, HostPortStripAny},
		{true, true, false, HostPortStripAny},
	} {
		c := rdsHCM("rc")
		c.StripMatchingHostPort, c.StripTrailingHostDot = tc.matching, tc.dot
		c.StripPortMode = &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: tc.any}
		_, l, err := decodeMsg(ListenerType, listenerWith("l", c))
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if l.StripHostPort != tc.want || l.StripTrailingHostDot != tc.dot {
			t.Errorf("%+v: got %v, dot %v", tc, l.StripHostPort, l.StripTrailingHostDot)
		}
	}
}
