package transport_test

import (
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// The error of a file that is no DiscoveryResponse names the line and
// column in that file, whatever its format is read through: YAML is read as
// JSON, whose positions are not the file's.
func TestFileErrorNamesTheFilesLine(t *testing.T) {
	for _, c := range []struct {
		name, content, want string
	}{
		{"lds.yaml", "version_info: \"1\"\nresources:\n- \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\n  name: L1\n  bogus: 3\n",
			"line 5:3 at resources[0].bogus"},
		{"lds.yaml", "version_info: \"1\"\nresources:\n- \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\n  name: L1\n" +
			"  address:\n    socket_address:\n      port_value: lots\n",
			"line 7:19 at resources[0].address.socket_address.port_value"},
		{"lds-yaml", "version_info: \"1\"\nnonce: [1]\n", "line 2:8 at nonce"}, // by content
		{"lds.txtpb", "version_info: \"1\"\nresources {\n  [type.googleapis.com/envoy.config.listener.v3.Listener] {\n    name: \"L1\"\n    bogus: 3\n  }\n}\n",
			"line 5:5"},
		{"lds.json", "{\"version_info\": \"1\",\n \"bogus\": 1}\n", "line 2:2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newFileEnv(t, c.name, fastOptions)
			if err := testutils.WriteFileAtomically(e.path(c.name), []byte(c.content)); err != nil {
				t.Fatal(err)
			}
			e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
			e.wantFileErrors(c.want, "L1")
		})
	}
}

// DecodeFile reads any message as the files of a FILESYSTEM server are
// read, for tools that read resources alone: a Listener in YAML, its
// errors placed in the file and naming the message it is not.
func TestDecodeFileReadsAnyMessage(t *testing.T) {
	l := &listenerv3.Listener{}
	format, err := transport.DecodeFile("l.yaml", []byte("name: L1\naddress:\n  socket_address: {port_value: 8080}\n"), l)
	if err != nil || format != "YAML" || l.GetName() != "L1" || l.GetAddress().GetSocketAddress().GetPortValue() != 8080 {
		t.Fatalf("DecodeFile = %q, %v; listener %v", format, err, l)
	}
	_, err = transport.DecodeFile("l", []byte("name: L1\nbogus: 3\n"), l)
	// protobuf-go varies the spacing of its messages on purpose: the
	// parts are matched, not the whole.
	if err == nil || !strings.Contains(err.Error(), "not a Listener in YAML: proto") || !strings.Contains(err.Error(), `(line 2:1 at bogus): unknown field "bogus"`) {
		t.Fatalf("DecodeFile of a bad Listener: %v", err)
	}
}
