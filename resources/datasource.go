package resources

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// DataSourceKind says where a DataSource's contents are.
type DataSourceKind int

const (
	// DataSourceFilename contents are in a local file.
	DataSourceFilename DataSourceKind = iota
	// DataSourceInlineBytes contents came in the resource as bytes.
	DataSourceInlineBytes
	// DataSourceInlineString contents came in the resource as a string.
	DataSourceInlineString
	// DataSourceEnvironmentVariable contents are in a local environment
	// variable.
	DataSourceEnvironmentVariable
)

// String returns the DataSourceKind as text, for logs and errors.
func (k DataSourceKind) String() string {
	switch k {
	case DataSourceFilename:
		return "filename"
	case DataSourceInlineBytes:
		return "inline_bytes"
	case DataSourceInlineString:
		return "inline_string"
	case DataSourceEnvironmentVariable:
		return "environment_variable"
	}
	return "DataSourceKind(" + strconv.Itoa(int(k)) + ")"
}

// DataSource is a validated config.core.v3.DataSource: where a piece of
// secret material (a certificate chain, a private key, a CA bundle) comes
// from. It describes the source and reads nothing: a caller that wants the
// bytes of a file or an environment variable reads them itself.
//
// A DataSource may hold a private key, so it never shows inline contents:
// String, every fmt verb and slog print only the kind and the size (or the
// file or variable name, which are not secret). Only Inline returns them.
// The zero value is a filename source with an empty name, which decoders
// never return.
type DataSource struct {
	kind   DataSourceKind
	name   string // file or environment variable name
	inline []byte // inline contents
}

// Kind returns where the contents are.
func (d DataSource) Kind() DataSourceKind { return d.kind }

// Filename returns the file of a DataSourceFilename source, else "".
func (d DataSource) Filename() string {
	if d.kind != DataSourceFilename {
		return ""
	}
	return d.name
}

// EnvironmentVariable returns the variable of a
// DataSourceEnvironmentVariable source, else "".
func (d DataSource) EnvironmentVariable() string {
	if d.kind != DataSourceEnvironmentVariable {
		return ""
	}
	return d.name
}

// Inline returns the contents of an inline source (bytes or string), nil
// for the others. The slice is shared and must not be modified.
func (d DataSource) Inline() []byte {
	if d.kind != DataSourceInlineBytes && d.kind != DataSourceInlineString {
		return nil
	}
	return d.inline
}

// String describes the source without its contents, e.g.
// `filename "/etc/tls/key.pem"` or "inline_bytes (1704 bytes)".
func (d DataSource) String() string {
	switch d.kind {
	case DataSourceFilename, DataSourceEnvironmentVariable:
		return d.kind.String() + " " + strconv.Quote(d.name)
	}
	return d.kind.String() + " (" + strconv.Itoa(len(d.inline)) + " bytes)"
}

// Format prints String whatever the verb, so that %x or %#v cannot show
// the contents either.
func (d DataSource) Format(f fmt.State, _ rune) { io.WriteString(f, d.String()) }

// LogValue implements slog.LogValuer with String.
func (d DataSource) LogValue() slog.Value { return slog.StringValue(d.String()) }

// newDataSource validates a DataSource: one specifier set, with a name or
// contents that are not empty. Its errors never quote the contents.
func newDataSource(p *corev3.DataSource) (DataSource, error) {
	if p == nil {
		return DataSource{}, errors.New("missing")
	}
	var d DataSource
	switch s := p.GetSpecifier().(type) {
	case *corev3.DataSource_Filename:
		d = DataSource{kind: DataSourceFilename, name: s.Filename}
	case *corev3.DataSource_EnvironmentVariable:
		d = DataSource{kind: DataSourceEnvironmentVariable, name: s.EnvironmentVariable}
	case *corev3.DataSource_InlineBytes:
		d = DataSource{kind: DataSourceInlineBytes, inline: s.InlineBytes}
	case *corev3.DataSource_InlineString:
		d = DataSource{kind: DataSourceInlineString, inline: []byte(s.InlineString)}
	case nil:
		return DataSource{}, errors.New("no specifier (want filename, inline_bytes, inline_string or environment_variable)")
	default:
		return DataSource{}, fmt.Errorf("unsupported specifier %T", s)
	}
	if d.name == "" && len(d.inline) == 0 {
		return DataSource{}, fieldErrorf(d.kind.String(), "must not be empty")
	}
	return d, nil
}

// optionalDataSource is newDataSource for a field that may be unset (nil
// result).
func optionalDataSource(p *corev3.DataSource) (*DataSource, error) {
	if p == nil {
		return nil, nil
	}
	d, err := newDataSource(p)
	if err != nil {
		return nil, err
	}
	return &d, nil
}
