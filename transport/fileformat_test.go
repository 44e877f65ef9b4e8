package transport_test

import (
	"testing"

	"github.com/goxds/xds/testutils"
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
