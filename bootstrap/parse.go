package bootstrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// The environment variables FromEnv reads, as gRPC does.
const (
	// EnvFile names the environment variable holding the path of a
	// bootstrap file. It takes precedence over EnvConfig.
	EnvFile = "GRPC_XDS_BOOTSTRAP"
	// EnvConfig names the environment variable holding the bootstrap JSON
	// itself.
	EnvConfig = "GRPC_XDS_BOOTSTRAP_CONFIG"
)

// ErrNoBootstrap is returned by FromEnv when neither EnvFile nor EnvConfig is
// set.
var ErrNoBootstrap = errors.New("bootstrap: neither " + EnvFile + " nor " + EnvConfig + " is set")

// Parse decodes and validates a bootstrap JSON document, and checks that the
// TLS files of its servers' selected channel_creds can be opened, as Load
// and FromEnv do: the files are read by this process, wherever the bytes
// came from. Unknown fields are ignored, as gRPC ignores them, and listed in
// Config.UnknownFields. An error names the offending field by its JSON path,
// e.g. "xds_servers[0].server_uri: must be a string, got number", invalid
// JSON its line and column, and a field in error whose object has unknown
// fields those fields, since one is most likely the field misspelt.
func Parse(data []byte) (*Config, error) {
	c, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return c, nil
}

// Load reads and parses the bootstrap file at path, as Parse does. Its
// errors name path. The directory of a FILESYSTEM server given as a
// relative path is taken relative to the directory of the bootstrap file.
func Load(path string) (*Config, error) {
	if path == "" {
		// os.ReadFile("") says only "open : no such file or directory".
		return nil, errors.New("bootstrap: Load: no file name given (the path is empty; FromEnv reads the file " + EnvFile + " names)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	c, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %s: %w", path, err)
	}
	c.resolveFilesystemDirs(filepath.Dir(path))
	return c, nil
}

// FromEnv loads the bootstrap the way gRPC finds it: from the file named by
// GRPC_XDS_BOOTSTRAP if that is set, otherwise from the JSON in
// GRPC_XDS_BOOTSTRAP_CONFIG. If neither is set (or both are empty) it returns
// ErrNoBootstrap. Either way it checks the TLS files as Load does, and its
// errors name the variable the bootstrap came from.
func FromEnv() (*Config, error) {
	if path := os.Getenv(EnvFile); path != "" {
		c, err := Load(path)
		if err != nil {
			// Load's error names the file; this says where its name came from.
			return nil, fmt.Errorf("%s=%s: %w", EnvFile, path, err)
		}
		return c, nil
	}
	if data := os.Getenv(EnvConfig); data != "" {
		c, err := parse([]byte(data))
		if err != nil {
			return nil, fmt.Errorf("bootstrap: %s: %w", EnvConfig, err)
		}
		return c, nil
	}
	return nil, ErrNoBootstrap
}

// parse decodes and validates data, and checks the TLS files it names.
func parse(data []byte) (*Config, error) {
	c, unknown, err := decode(data)
	if err == nil {
		err = c.checkCredsFiles()
	}
	if err != nil {
		return nil, explainUnknown(err, unknown)
	}
	c.UnknownFields = unknown.list()
	c.EndpointFallback = endpointFallbackFromEnv()
	return c, nil
}

// decode decodes and validates data, and returns the unknown fields it
// found (see unknown.go) for errors to name.
func decode(data []byte) (*Config, unknownMap, error) {
	var doc json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, jsonError(data, err)
	}
	top, err := asObject(doc, "")
	if err != nil {
		return nil, nil, err
	}
	unknown := unknownFields(top)
	c, err := decodeTop(top)
	return c, unknown, err
}

// jsonError says where in data the syntax error err is, by line and
// column (of characters, counting from 1), as an editor shows them:
// encoding/json gives only a byte offset.
func jsonError(data []byte, err error) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("invalid JSON: the document is empty")
	}
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	// Offset counts the bytes read, the offending one included.
	pos := min(max(int(se.Offset)-1, 0), len(data))
	before := data[:pos]
	line := 1 + bytes.Count(before, []byte("\n"))
	col := 1 + utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	return fmt.Errorf("invalid JSON at line %d, column %d: %w", line, col, err)
}

func decodeTop(top object) (*Config, error) {
	var err error
	c := &Config{}
	if raw, ok := top.get("xds_servers"); ok {
		if c.Servers, err = decodeServers(raw, "xds_servers"); err != nil {
			return nil, err
		}
	}
	if raw, ok := top.get("node"); ok {
		if c.Node, err = decodeNode(raw, "node"); err != nil {
			return nil, err
		}
	}
	if raw, ok := top.get("authorities"); ok {
		if c.Authorities, err = decodeAuthorities(raw, "authorities"); err != nil {
			return nil, err
		}
	}
	const defaultTemplate = "client_default_listener_resource_name_template"
	if c.ClientDefaultListenerResourceNameTemplate, err = top.str(defaultTemplate, defaultTemplate); err != nil {
		return nil, err
	}
	if c.ClientDefaultListenerResourceNameTemplate == "" {
		c.ClientDefaultListenerResourceNameTemplate = "%s"
	}
	const serverTemplate = "server_listener_resource_name_template"
	if c.ServerListenerResourceNameTemplate, err = top.str(serverTemplate, serverTemplate); err != nil {
		return nil, err
	}
	if raw, ok := top.get("certificate_providers"); ok {
		if c.CertificateProviders, err = decodeCertProviders(raw, "certificate_providers"); err != nil {
			return nil, err
		}
	}
	if raw, ok := top.get("allowed_grpc_services"); ok {
		if c.AllowedGRPCServices, err = decodeAllowedGRPCServices(raw, "allowed_grpc_services"); err != nil {
			return nil, err
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func decodeServers(raw json.RawMessage, path string) ([]ServerConfig, error) {
	elems, err := asArray(raw, path)
	if err != nil {
		return nil, err
	}
	servers := make([]ServerConfig, len(elems))
	for i, e := range elems {
		if servers[i], err = decodeServer(e, index(path, i)); err != nil {
			return nil, err
		}
	}
	return servers, nil
}

func decodeServer(raw json.RawMessage, path string) (ServerConfig, error) {
	var s ServerConfig
	o, err := asObject(raw, path)
	if err != nil {
		return s, err
	}
	if s.ServerURI, err = o.str("server_uri", member(path, "server_uri")); err != nil {
		return s, err
	}
	if raw, ok := o.get("channel_creds"); ok {
		if s.ChannelCreds, err = decodeCredsList(raw, member(path, "channel_creds")); err != nil {
			return s, err
		}
	}
	if raw, ok := o.get("call_creds"); ok {
		if s.CallCreds, err = decodeCallCredsList(raw, member(path, "call_creds")); err != nil {
			return s, err
		}
	}
	if raw, ok := o.get("server_features"); ok {
		if s.ServerFeatures, err = asStrings(raw, member(path, "server_features")); err != nil {
			return s, err
		}
	}
	if raw, ok := o.get("api_type"); ok {
		p := member(path, "api_type")
		name, err := asString(raw, p)
		if err != nil {
			return s, err
		}
		t, ok := parseAPIType(name)
		if !ok {
			return s, fieldErrorf(p, "unknown value %q (want one of %s)", name, apiTypeList())
		}
		s.APIType = t
	}
	if err := decodeSourceFields(o, path, &s); err != nil {
		return s, err
	}
	return s, nil
}

// typedEntry is one {"type", "config"} object of a credentials list
// (channel_creds, call_creds): its type and its config as written.
type typedEntry struct {
	typ    string
	config json.RawMessage // compacted; nil if absent
}

// decodeTypedList decodes a list of {"type", "config"} objects at path,
// each with a string type.
func decodeTypedList(raw json.RawMessage, path string) ([]typedEntry, error) {
	elems, err := asArray(raw, path)
	if err != nil {
		return nil, err
	}
	out := make([]typedEntry, len(elems))
	for i, e := range elems {
		p := index(path, i)
		o, err := asObject(e, p)
		if err != nil {
			return nil, err
		}
		if out[i].typ, err = o.str("type", member(p, "type")); err != nil {
			return nil, err
		}
		if cfg, ok := o.get("config"); ok {
			out[i].config = compact(cfg)
		}
	}
	return out, nil
}

// decodeCredsList decodes channel_creds. Every entry keeps its type and raw
// config; only the entry that will be used, if it is "tls", has its config
// decoded, since gRPC does not look at the others either.
func decodeCredsList(raw json.RawMessage, path string) ([]ChannelCreds, error) {
	typed, err := decodeTypedList(raw, path)
	if err != nil {
		return nil, err
	}
	creds := make([]ChannelCreds, len(typed))
	for i, t := range typed {
		creds[i].Type, creds[i].Config = t.typ, t.config
	}
	i := selectCreds(creds)
	if i < 0 {
		return creds, nil
	}
	cfgPath := member(index(path, i), "config")
	if cfg := creds[i].Config; len(cfg) > 0 && kindOf(cfg) != "null" {
		// A Struct in gRPC's schema, whatever the type, "insecure" included.
		if _, err := asObject(cfg, cfgPath); err != nil {
			return nil, err
		}
	}
	if creds[i].Type == CredsTLS {
		if creds[i].TLS, err = decodeTLSCreds(creds[i].Config, cfgPath); err != nil {
			return nil, err
		}
	}
	return creds, nil
}

// checkCredsFiles reports a file named by the credentials of a server that
// cannot be opened now. Parse, Load and FromEnv call it, so that a path
// mistyped in a bootstrap fails when the bootstrap is read, naming its
// field, rather than as a connection failure when the first stream starts;
// and so that the three agree (Parse once did not, and a bootstrap it took
// failed in Load). The files are read again whenever credentials are built,
// so rotated files are picked up. grpc-go checks them nowhere: its file
// watcher reads them in the background and handshakes fail until they
// appear.
func (c *Config) checkCredsFiles() error {
	if err := checkServersFiles(c.Servers, "xds_servers"); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(c.Authorities)) {
		path := member(mapKey("authorities", name), "xds_servers")
		if err := checkServersFiles(c.Authorities[name].Servers, path); err != nil {
			return err
		}
	}
	return nil
}

func checkServersFiles(servers []ServerConfig, path string) error {
	for i, s := range servers {
		ci := s.selectedCreds()
		if s.APIType == APITypeFilesystem || ci < 0 || s.ChannelCreds[ci].Type != CredsTLS {
			continue
		}
		entry := index(member(index(path, i), "channel_creds"), ci)
		t, err := s.ChannelCreds[ci].tlsCreds(entry)
		if err == nil {
			err = t.checkFiles(member(entry, "config"))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkFiles reports the first file of t that cannot be opened.
func (t TLSCreds) checkFiles(path string) error {
	for _, f := range []struct{ field, name string }{
		{"ca_certificate_file", t.CACertificateFile},
		{"certificate_file", t.CertificateFile},
		{"private_key_file", t.PrivateKeyFile},
	} {
		if f.name == "" {
			continue
		}
		fh, err := os.Open(f.name)
		if err != nil {
			// Wrapped, so that errors.Is(err, fs.ErrNotExist) holds.
			return fmt.Errorf("%s: %w", member(path, f.field), err)
		}
		fh.Close()
	}
	return nil
}

// decodeTLSCreds decodes the config of a "tls" entry; a missing config is an
// empty one.
func decodeTLSCreds(raw json.RawMessage, path string) (*TLSCreds, error) {
	t := &TLSCreds{}
	if len(raw) == 0 || kindOf(raw) == "null" {
		return t, nil
	}
	o, err := asObject(raw, path)
	if err != nil {
		return nil, err
	}
	if err := o.strs(path, []stringField{
		{"ca_certificate_file", &t.CACertificateFile},
		{"certificate_file", &t.CertificateFile},
		{"private_key_file", &t.PrivateKeyFile},
	}); err != nil {
		return nil, err
	}
	if raw, ok := o.get("refresh_interval"); ok {
		p := member(path, "refresh_interval")
		s, err := asString(raw, p)
		if err != nil {
			return nil, err
		}
		d := &durationpb.Duration{}
		if protojson.Unmarshal(raw, d) != nil {
			return nil, fieldErrorf(p, `invalid duration %q (want a string such as "600s")`, s)
		}
		t.RefreshInterval = d.AsDuration()
	}
	return t, nil
}

func decodeNode(raw json.RawMessage, path string) (Node, error) {
	var n Node
	o, err := asObject(raw, path)
	if err != nil {
		return n, err
	}
	if err := o.strs(path, []stringField{{"id", &n.ID}, {"cluster", &n.Cluster}}); err != nil {
		return n, err
	}
	if raw, ok := o.get("locality"); ok {
		lp := member(path, "locality")
		lo, err := asObject(raw, lp)
		if err != nil {
			return n, err
		}
		if err := lo.strs(lp, []stringField{
			{"region", &n.Locality.Region},
			{"zone", &n.Locality.Zone},
			{"sub_zone", &n.Locality.SubZone},
		}); err != nil {
			return n, err
		}
	}
	if raw, ok := o.get("metadata"); ok {
		mp := member(path, "metadata")
		if k := kindOf(raw); k != "object" {
			return n, fieldErrorf(mp, "must be a JSON object, got %s", k)
		}
		n.Metadata = &structpb.Struct{}
		if err := protojson.Unmarshal(raw, n.Metadata); err != nil {
			return n, fieldErrorf(mp, "%v", err)
		}
	}
	// user_agent_name and user_agent_version are deliberately not read:
	// the client always presents itself as goxds.
	return n, nil
}

func decodeAuthorities(raw json.RawMessage, path string) (map[string]Authority, error) {
	o, err := asObject(raw, path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Authority, len(o))
	for _, name := range o.sortedKeys() {
		p := mapKey(path, name)
		ao, err := asObject(o[name], p)
		if err != nil {
			return nil, err
		}
		var a Authority
		const template = "client_listener_resource_name_template"
		if a.ClientListenerResourceNameTemplate, err = ao.str(template, member(p, template)); err != nil {
			return nil, err
		}
		if raw, ok := ao.get("xds_servers"); ok {
			if a.Servers, err = decodeServers(raw, member(p, "xds_servers")); err != nil {
				return nil, err
			}
		}
		// Checked whether or not A95 is on, so that a bootstrap is valid
		// or not whatever the environment; honoured only when it is.
		if a.FallbackOnReachabilityOnly, err = ao.boolean(fallbackKnob, member(p, fallbackKnob)); err != nil {
			return nil, err
		}
		out[name] = a
	}
	return out, nil
}

func decodeCertProviders(raw json.RawMessage, path string) (map[string]CertificateProvider, error) {
	o, err := asObject(raw, path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]CertificateProvider, len(o))
	for _, name := range o.sortedKeys() {
		p := mapKey(path, name)
		po, err := asObject(o[name], p)
		if err != nil {
			return nil, err
		}
		var cp CertificateProvider
		if cp.PluginName, err = po.str("plugin_name", member(p, "plugin_name")); err != nil {
			return nil, err
		}
		if cfg, ok := po.get("config"); ok {
			cp.Config = compact(cfg)
		}
		out[name] = cp
	}
	return out, nil
}
