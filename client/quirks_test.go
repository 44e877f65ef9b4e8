package client

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestIstiodSign(t *testing.T) {
	istioNode := &corev3.Node{Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"ISTIO_VERSION": structpb.NewStringValue("1.27.0"),
	}}}
	otherNode := &corev3.Node{Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"VERSION": structpb.NewStringValue("1.27.0"),
	}}}
	const istiodID = `{"Component":"istiod","ID":"istiod-5d8b-x","Info":{"version":"1.24.0"}}`
	for _, tc := range []struct {
		cp, uri string
		node    *corev3.Node
		want    string
	}{
		{istiodID, "xds.example.com:443", nil, "control_plane"},
		{`{"component":"istiod"}`, "xds.example.com:443", nil, "control_plane"},
		{`{"Component":"sdp","ID":"istiod"}`, "xds.example.com:443", nil, ""},
		{"istiod", "xds.example.com:443", nil, ""},
		{`{"Component":`, "xds.example.com:443", nil, ""},
		{"", "istiod.istio-system.svc:15012", nil, "server_uri"},
		{"", "dns:///istiod-canary.istio-system:15012", nil, "server_uri"},
		{"", "istiod:15010", nil, "server_uri"},
		{"", "xds:///istiod", nil, "server_uri"},
		{"", "istiodx.example.com:15012", nil, ""},
		{"", "dns:///mesh.example.com/istiod-ish", nil, ""},
		{"", "unix:///etc/istio/proxy/XDS", istioNode, "node metadata ISTIO_VERSION"},
		{"", "unix:///etc/istio/proxy/XDS", otherNode, ""},
		{"", "127.0.0.1:1234", nil, ""},
	} {
		if got := istiodSign(tc.cp, tc.uri, tc.node); got != tc.want {
			t.Errorf("istiodSign(%q, %q, %v) = %q, want %q", tc.cp, tc.uri, tc.node.GetMetadata(), got, tc.want)
		}
	}
}
