package testutils

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// MarshalResponseFile encodes resp as a FILESYSTEM server's file named path
// holds it, by the extension of path: ".json" JSON, ".yaml" or ".yml" YAML,
// ".txt", ".textproto", ".txtpb", ".pbtxt" or ".prototxt" proto text, and
// anything else binary protobuf.
func MarshalResponseFile(path string, resp *discoveryv3.DiscoveryResponse) ([]byte, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return protojson.MarshalOptions{Multiline: true, UseProtoNames: true}.Marshal(resp)
	case ".yaml", ".yml":
		js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(resp)
		if err != nil {
			return nil, err
		}
		return yaml.JSONToYAML(js)
	case ".txt", ".textproto", ".txtpb", ".pbtxt", ".prototxt":
		return prototext.MarshalOptions{Multiline: true}.Marshal(resp)
	}
	return proto.Marshal(resp)
}

// WriteResponseFile writes resp to path (see MarshalResponseFile) the way
// a file should be replaced under a running client: written beside it, then
// renamed over it, so that the client never reads half a file.
func WriteResponseFile(path string, resp *discoveryv3.DiscoveryResponse) error {
	data, err := MarshalResponseFile(path, resp)
	if err != nil {
		return fmt.Errorf("testutils: encoding %s: %w", path, err)
	}
	return WriteFileAtomically(path, data)
}

// WriteFileAtomically writes data to a temporary file in the directory of
// path and renames it to path.
func WriteFileAtomically(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("testutils: %w", err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("testutils: writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("testutils: %w", err)
	}
	return nil
}
