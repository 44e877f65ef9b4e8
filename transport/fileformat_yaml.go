package transport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// A YAML file is read as the JSON sigs.k8s.io/yaml makes of it, so the
// errors protojson finds in it are placed in that JSON, all on one line
// ("line 1:397"), not in the file the user edited. decodeYAML places them
// in the file: the position in the JSON gives the path of keys and indices
// that leads to it, and that path leads, in the YAML's node tree (yaml.v3,
// the only YAML parser at hand that keeps positions; sigs.k8s.io/yaml
// itself depends on it), to the line and column of the key or value.

// jsonErrPos matches the position in a protojson error.
var jsonErrPos = regexp.MustCompile(`\(line (\d+):(\d+)\)`)

// yamlPosError is a protojson error placed in the YAML file.
type yamlPosError struct {
	msg string
	err error
}

func (e *yamlPosError) Error() string { return e.msg }
func (e *yamlPosError) Unwrap() error { return e.err }

// decodeYAML reads data, YAML, into resp.
func decodeYAML(data []byte, unmarshal func([]byte) error) error {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err // the YAML parser's errors name the file's lines
	}
	if err := unmarshal(js); err != nil {
		return placeInYAML(data, js, err)
	}
	return nil
}

// placeInYAML rewrites err, protojson's error reading js, the JSON of data,
// to give the line and column in data, and the path there. err is returned
// as it is when it cannot be placed.
func placeInYAML(data, js []byte, err error) (out error) {
	msg := err.Error()
	m := jsonErrPos.FindStringSubmatchIndex(msg)
	if m == nil {
		return err
	}
	defer func() {
		// The position is a help, never a reason to fail otherwise: a
		// YAML parser that trips over what another one read is ignored.
		if recover() != nil {
			out = err
		}
	}()
	line, _ := strconv.Atoi(msg[m[2]:m[3]])
	col, _ := strconv.Atoi(msg[m[4]:m[5]])
	off, ok := jsonOffset(js, line, col)
	if !ok {
		return err
	}
	path, isKey := jsonPathAt(js, off)
	var doc yamlv3.Node
	if yamlv3.Unmarshal(data, &doc) != nil {
		return err
	}
	n := yamlNodeAt(&doc, path, isKey)
	if n == nil || n.Line == 0 {
		return err
	}
	where := fmt.Sprintf("(line %d:%d", n.Line, n.Column)
	if len(path) > 0 {
		where += " at " + formatJSONPath(path)
	}
	return &yamlPosError{msg: msg[:m[0]] + where + ")" + msg[m[1]:], err: err}
}

// jsonOffset returns the byte offset of line:col in js, as protojson counts
// them: from 1, columns in runes.
func jsonOffset(js []byte, line, col int) (int, bool) {
	off := 0
	for ; line > 1; line-- {
		i := bytes.IndexByte(js[off:], '\n')
		if i < 0 {
			return 0, false
		}
		off += i + 1
	}
	for ; col > 1 && off < len(js); col-- {
		_, size := utf8.DecodeRune(js[off:])
		off += size
	}
	return off, col <= 1
}

// jsonPathAt returns the path (object keys and array indices) to the token
// of js at offset off, and whether that token is an object's key.
func jsonPathAt(js []byte, off int) ([]any, bool) {
	type frame struct {
		obj    bool
		key    string
		idx    int
		hasKey bool // obj: key was read, its value not yet
	}
	var stack []*frame
	path := func() []any {
		p := make([]any, 0, len(stack))
		for _, f := range stack {
			if f.obj {
				p = append(p, f.key)
			} else {
				p = append(p, f.idx)
			}
		}
		return p
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	var last []any
	for {
		tok, err := dec.Token()
		if err != nil {
			return last, false
		}
		end := int(dec.InputOffset())
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if end > off {
				return path(), false
			}
			continue
		}
		if top != nil && top.obj && !top.hasKey {
			top.key, top.hasKey = fmt.Sprint(tok), true
			if end > off {
				return path(), true
			}
			continue
		}
		// A value.
		switch {
		case top == nil:
		case top.obj:
			top.hasKey = false
		default:
			top.idx++
		}
		last = path()
		if end > off {
			return last, false
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{obj: d == '{', idx: -1})
		}
	}
}

// yamlNodeAt follows path from the document doc, as far as it leads, and
// returns the node it ends at: the key's node if isKey, else the value's.
func yamlNodeAt(doc *yamlv3.Node, path []any, isKey bool) *yamlv3.Node {
	n := doc
	if n.Kind == yamlv3.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	for i, p := range path {
		for n.Kind == yamlv3.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		next, keyNode := (*yamlv3.Node)(nil), (*yamlv3.Node)(nil)
		switch p := p.(type) {
		case string:
			if n.Kind == yamlv3.MappingNode {
				for j := 0; j+1 < len(n.Content); j += 2 {
					if n.Content[j].Value == p {
						keyNode, next = n.Content[j], n.Content[j+1]
					}
				}
			}
		case int:
			if n.Kind == yamlv3.SequenceNode && p >= 0 && p < len(n.Content) {
				next = n.Content[p]
			}
		}
		if next == nil {
			return n // as near as the YAML lets us
		}
		if i == len(path)-1 && isKey && keyNode != nil {
			return keyNode
		}
		n = next
	}
	return n
}

// formatJSONPath writes path as resources[0].name.
func formatJSONPath(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(fmt.Sprint(p))
		}
	}
	return b.String()
}
