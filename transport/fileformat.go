package transport

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// The formats a file of a FILESYSTEM server may hold its DiscoveryResponse
// in.
const (
	formatBinary = "binary proto"
	formatJSON   = "JSON"
	formatYAML   = "YAML"
	formatText   = "proto text"
)

// formatByExt maps file name extensions to formats. A file with any other
// extension is recognised by its content.
var formatByExt = map[string]string{
	".pb":        formatBinary,
	".bin":       formatBinary,
	".binpb":     formatBinary,
	".json":      formatJSON,
	".yaml":      formatYAML,
	".yml":       formatYAML,
	".txt":       formatText,
	".textproto": formatText,
	".txtpb":     formatText,
	".pbtxt":     formatText,
	".prototxt":  formatText,
}

// decodeResponseFile reads the DiscoveryResponse of typeURL in a file's
// bytes. The format is the extension's, or else the first that reads the
// content: JSON for content that starts with "{", then proto text, YAML,
// and binary for content that is not UTF-8. Messages inside Any fields must
// be linked into the program (the built-in resource types are). A
// type_url left out is typeURL; another one is an error. Errors place what
// is wrong at its line and column in the file, a YAML file's too, though it
// is read as JSON (fileformat_yaml.go).
func decodeResponseFile(path string, data []byte, typeURL string) (*discoveryv3.DiscoveryResponse, string, error) {
	format, known := formatByExt[strings.ToLower(filepath.Ext(path))]
	var resp *discoveryv3.DiscoveryResponse
	var err error
	if known {
		resp, err = decodeAs(format, data)
	} else {
		resp, format, err = sniff(data)
	}
	if err != nil {
		return nil, format, err
	}
	switch resp.GetTypeUrl() {
	case "":
		resp.TypeUrl = typeURL
	case typeURL:
	default:
		return nil, format, fmt.Errorf("the file holds a response of %s, but it is the file of %s", resp.GetTypeUrl(), typeURL)
	}
	return resp, format, nil
}

func decodeAs(format string, data []byte) (*discoveryv3.DiscoveryResponse, error) {
	resp := &discoveryv3.DiscoveryResponse{}
	var err error
	switch format {
	case formatBinary:
		err = proto.Unmarshal(data, resp)
	case formatJSON:
		err = protojson.Unmarshal(data, resp)
	case formatText:
		err = prototext.Unmarshal(data, resp)
	case formatYAML:
		err = decodeYAML(data, func(js []byte) error { return protojson.Unmarshal(js, resp) })
	}
	if err != nil {
		return nil, fmt.Errorf("not a DiscoveryResponse in %s: %w", format, err)
	}
	return resp, nil
}

// sniff tries the formats that could hold data, most specific first.
func sniff(data []byte) (*discoveryv3.DiscoveryResponse, string, error) {
	if !utf8.Valid(data) {
		resp, err := decodeAs(formatBinary, data)
		return resp, formatBinary, err
	}
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		resp, err := decodeAs(formatJSON, data)
		return resp, formatJSON, err
	}
	var errs []error
	for _, f := range []string{formatText, formatYAML, formatBinary} {
		resp, err := decodeAs(f, data)
		if err == nil && f == formatBinary && len(resp.ProtoReflect().GetUnknown()) > 0 {
			// Text that happens to parse as protobuf wire format.
			err = fmt.Errorf("not a DiscoveryResponse in %s: only unknown fields", f)
		}
		if err == nil {
			return resp, f, nil
		}
		errs = append(errs, err)
	}
	return nil, "", fmt.Errorf("the content is in no format known by its extension or content: %w", errors.Join(errs...))
}
