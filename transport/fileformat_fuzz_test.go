package transport

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"
)

const fuzzListenerURL = "type.googleapis.com/envoy.config.listener.v3.Listener"

// fuzzFileNames are the names a fuzzed file is read under: one per
// extension family, and one that leaves the format to the content.
var fuzzFileNames = []string{"lds.pb", "lds.json", "lds.yaml", "lds.txtpb", "lds"}

// FuzzDecodeResponseFile feeds arbitrary bytes to the reader of a
// FILESYSTEM server's files, under each kind of name. It must never panic;
// a file it accepts holds a response of the file's type, in the format its
// extension names if it names one.
func FuzzDecodeResponseFile(f *testing.F) {
	l, err := anypb.New(&listenerv3.Listener{Name: "L1"})
	if err != nil {
		f.Fatal(err)
	}
	resp := &discoveryv3.DiscoveryResponse{VersionInfo: "1", TypeUrl: fuzzListenerURL, Resources: []*anypb.Any{l}}
	bin, _ := proto.Marshal(resp)
	js, _ := protojson.Marshal(resp)
	txt, _ := prototext.Marshal(resp)
	yml, _ := yaml.JSONToYAML(js)
	for i, data := range [][]byte{bin, js, yml, txt} {
		f.Add(uint8(i), data)
		f.Add(uint8(len(fuzzFileNames)-1), data)
	}
	f.Add(uint8(1), []byte(`{"type_url": "type.googleapis.com/envoy.config.cluster.v3.Cluster"}`))
	f.Add(uint8(2), []byte("version_info: [1, 2"))
	f.Add(uint8(4), []byte("\xff\xfe garbage"))
	// YAML that parses but is no DiscoveryResponse: its error is placed
	// in the YAML (fileformat_yaml.go).
	f.Add(uint8(2), []byte("version_info: \"1\"\nresources:\n- \"@type\": "+fuzzListenerURL+"\n  name: L1\n  bogus: 3\n"))
	f.Add(uint8(2), []byte("a: &x {b: [1, {c: *x}]}\nnonce: [1]\n"))

	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		path := fuzzFileNames[int(which)%len(fuzzFileNames)]
		resp, format, err := decodeResponseFile(path, data, fuzzListenerURL)
		if err != nil {
			if resp != nil {
				t.Fatalf("error %v with a response", err)
			}
			return
		}
		if resp.GetTypeUrl() != fuzzListenerURL {
			t.Fatalf("accepted a response of %q as the file of %s", resp.GetTypeUrl(), fuzzListenerURL)
		}
		if want, ok := formatByExt[path[len("lds"):]]; ok && format != want {
			t.Fatalf("%s read as %s", path, format)
		}
		if format == "" {
			t.Fatal("accepted in no format")
		}
	})
}
