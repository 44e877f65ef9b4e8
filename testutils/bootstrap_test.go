package testutils

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestBootstrapJSON(t *testing.T) {
	got := BootstrapJSON(BootstrapOptions{
		ServerURI:       "127.0.0.1:1",
		APIType:         APITypeDelta,
		ServerFeatures:  []string{"xds_v3", "ignore_resource_deletion"},
		FallbackServers: []BootstrapServer{{URI: "127.0.0.1:2", APIType: APITypeSotW}},
		NodeID:          "node-1",
		Authorities: map[string]BootstrapAuthority{
			"a.example.com": {
				ClientListenerResourceNameTemplate: "xdstp://a.example.com/envoy.config.listener.v3.Listener/%s",
				Servers:                            []BootstrapServer{{URI: "127.0.0.1:3"}},
			},
			"b.example.com": {},
		},
		ClientDefaultListenerResourceNameTemplate: "xdstp://b.example.com/envoy.config.listener.v3.Listener/%s",
	})
	want := `{
		"xds_servers": [
			{"server_uri": "127.0.0.1:1", "channel_creds": [{"type": "insecure"}],
			 "server_features": ["xds_v3", "ignore_resource_deletion"], "api_type": "AGGREGATED_DELTA_GRPC"},
			{"server_uri": "127.0.0.1:2", "channel_creds": [{"type": "insecure"}], "api_type": "AGGREGATED_GRPC"}
		],
		"node": {"id": "node-1"},
		"authorities": {
			"a.example.com": {
				"client_listener_resource_name_template": "xdstp://a.example.com/envoy.config.listener.v3.Listener/%s",
				"xds_servers": [{"server_uri": "127.0.0.1:3", "channel_creds": [{"type": "insecure"}]}]
			},
			"b.example.com": {}
		},
		"client_default_listener_resource_name_template": "xdstp://b.example.com/envoy.config.listener.v3.Listener/%s"
	}`
	assertSameJSON(t, got, want)

	// The minimal bootstrap: one server, nothing optional.
	assertSameJSON(t, BootstrapJSON(BootstrapOptions{ServerURI: "127.0.0.1:1"}),
		`{"xds_servers": [{"server_uri": "127.0.0.1:1", "channel_creds": [{"type": "insecure"}]}]}`)
}

func assertSameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("BootstrapJSON wrote invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad test JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("BootstrapJSON wrote\n%s\nwant\n%s", got, want)
	}
}
