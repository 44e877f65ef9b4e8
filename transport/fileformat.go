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
// bytes, as DecodeFile reads any message. A type_url left out is typeURL;
// another one is an error.
func decodeResponseFile(path string, data []byte, typeURL string) (*discoveryv3.DiscoveryResponse, string, error) {
	resp := &discoveryv3.DiscoveryResponse{}
	format, err := DecodeFile(path, data, resp)
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

// DecodeFile reads msg from data, the content of the file at path, the way
// a FILESYSTEM server's files are read: in the format the extension names
// (.pb .bin .binpb: binary protobuf; .json; .yaml .yml; .txt .textproto
// .txtpb .pbtxt .prototxt: proto text), or else the first that reads the
// content: JSON for content that starts with "{", then proto text, YAML,
// and binary, which is the only one tried for content that is not UTF-8.
// It returns the format read ("binary proto", "JSON", "YAML", "proto
// text"). Messages inside Any fields must be linked into the program (the
// built-in resource types are). Errors place what is wrong at its line and
// column in the file, a YAML file's too, though it is read as JSON
// (fileformat_yaml.go). msg is reset first, and holds nothing useful after
// an error. It is exported for tools that read resources as goxds's files
// do (cmd/goxds validate), so that there is one reader of such files.
func DecodeFile(path string, data []byte, msg proto.Message) (format string, err error) {
	format, known := formatByExt[strings.ToLower(filepath.Ext(path))]
	if known {
		return format, decodeAs(format, data, msg)
	}
	return sniff(data, msg)
}

// decodeAs reads data in format into msg, after resetting it.
func decodeAs(format string, data []byte, msg proto.Message) error {
	proto.Reset(msg)
	var err error
	switch format {
	case formatBinary:
		err = proto.Unmarshal(data, msg)
	case formatJSON:
		err = protojson.Unmarshal(data, msg)
	case formatText:
		err = prototext.Unmarshal(data, msg)
	case formatYAML:
		err = decodeYAML(data, func(js []byte) error { return protojson.Unmarshal(js, msg) })
	}
	if err != nil {
		return fmt.Errorf("not %s in %s: %w", article(msg), format, err)
	}
	return nil
}

// article names msg's type with its indefinite article: "a
// DiscoveryResponse", "an Any".
func article(msg proto.Message) string {
	name := string(msg.ProtoReflect().Descriptor().Name())
	if name != "" && strings.ContainsRune("AEIOU", rune(name[0])) {
		return "an " + name
	}
	return "a " + name
}

// sniff tries the formats that could hold data, most specific first.
func sniff(data []byte, msg proto.Message) (string, error) {
	if !utf8.Valid(data) {
		return formatBinary, decodeAs(formatBinary, data, msg)
	}
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		return formatJSON, decodeAs(formatJSON, data, msg)
	}
	var errs []error
	for _, f := range []string{formatText, formatYAML, formatBinary} {
		err := decodeAs(f, data, msg)
		if err == nil && f == formatBinary && len(msg.ProtoReflect().GetUnknown()) > 0 {
			// Text that happens to parse as protobuf wire format.
			err = fmt.Errorf("not %s in %s: only unknown fields", article(msg), f)
		}
		if err == nil {
			return f, nil
		}
		errs = append(errs, err)
	}
	proto.Reset(msg)
	return "", fmt.Errorf("the content is in no format known by its extension or content: %w", errors.Join(errs...))
}
