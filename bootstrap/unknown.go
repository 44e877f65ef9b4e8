package bootstrap

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Unknown fields are not an error, as in gRPC: a bootstrap written for a
// newer gRPC, or carrying fields of another implementation (grpc-go's
// fields, Istio's generator's UserAgentVersionType), must keep loading,
// and one file serves every client of a host. But a misspelt field is then
// just absent, and a newcomer who wrote "xds_server" was told only that
// xds_servers must list a server. So the parser notes the fields it does
// not know: Config.UnknownFields lists them for tools to warn about, and an
// error about an object that has some names them, with the known field
// each most resembles.

// The members of each object of the bootstrap that goxds reads, or that
// gRPC reads and goxds deliberately ignores (these are not typos).
var (
	topFields = []string{
		"xds_servers", "node", "authorities", "client_default_listener_resource_name_template",
		"server_listener_resource_name_template", "certificate_providers",
		"allowed_grpc_services", // gRFC A102
	}
	serverFields = []string{
		"server_uri", "channel_creds", "server_features", "api_type",
		"api_type_per_type", "resource_files", "refresh_delay", "request_timeout",
		"call_creds", // gRFC A97
	}
	credsFields    = []string{"type", "config"}
	tlsFields      = []string{"ca_certificate_file", "certificate_file", "private_key_file", "refresh_interval", "spiffe_trust_bundle_map_file"}
	nodeFields     = []string{"id", "cluster", "locality", "metadata", "user_agent_name", "user_agent_version"}
	localityFields = []string{"region", "zone", "sub_zone"}
	authFields     = []string{"client_listener_resource_name_template", "xds_servers", fallbackKnob}
	providerFields = []string{"plugin_name", "config"}
)

// unknownFields maps the JSON path of each object of doc holding members
// goxds does not know to those members, sorted. It looks only at objects
// of the expected kinds; decoding reports the rest.
func unknownFields(top object) unknownMap {
	u := make(unknownMap)
	u.note(top, "", topFields)
	u.servers(top["xds_servers"], "xds_servers")
	if n := objectOf(top["node"]); n != nil {
		u.note(n, "node", nodeFields)
		u.note(objectOf(n["locality"]), "node.locality", localityFields)
	}
	auths := objectOf(top["authorities"])
	for _, name := range auths.sortedKeys() {
		p := mapKey("authorities", name)
		if a := objectOf(auths[name]); a != nil {
			u.note(a, p, authFields)
			u.servers(a["xds_servers"], member(p, "xds_servers"))
		}
	}
	providers := objectOf(top["certificate_providers"])
	for _, name := range providers.sortedKeys() {
		u.note(objectOf(providers[name]), mapKey("certificate_providers", name), providerFields)
	}
	return u
}

type unknownMap map[string][]string

func (u unknownMap) servers(raw json.RawMessage, path string) {
	var elems []json.RawMessage
	if kindOf(raw) != "array" || json.Unmarshal(raw, &elems) != nil {
		return
	}
	for i, e := range elems {
		s := objectOf(e)
		if s == nil {
			continue
		}
		p := index(path, i)
		u.note(s, p, serverFields)
		var creds []json.RawMessage
		if kindOf(s["channel_creds"]) != "array" || json.Unmarshal(s["channel_creds"], &creds) != nil {
			continue
		}
		for j, c := range creds {
			co := objectOf(c)
			cp := index(member(p, "channel_creds"), j)
			u.note(co, cp, credsFields)
			if t, _ := asString(co["type"], ""); t == CredsTLS {
				u.note(objectOf(co["config"]), member(cp, "config"), tlsFields)
			}
		}
	}
}

// note records the members of o (at path) not in known.
func (u unknownMap) note(o object, path string, known []string) {
	for _, k := range o.sortedKeys() {
		if !slices.Contains(known, k) {
			u[path] = append(u[path], k)
		}
	}
}

// objectOf decodes raw if it is an object, else returns nil.
func objectOf(raw json.RawMessage) object {
	if kindOf(raw) != "object" {
		return nil
	}
	var o object
	if json.Unmarshal(raw, &o) != nil {
		return nil
	}
	return o
}

// list returns the unknown fields as JSON paths, sorted.
func (u unknownMap) list() []string {
	var out []string
	for path, keys := range u {
		for _, k := range keys {
			out = append(out, member(path, k))
		}
	}
	slices.Sort(out)
	return out
}

// knownAt returns the known members of the object at path, for
// suggestions.
func knownAt(path string) []string {
	switch {
	case path == "":
		return topFields
	case path == "node":
		return nodeFields
	case path == "node.locality":
		return localityFields
	case strings.HasSuffix(path, ".config"):
		return tlsFields
	case strings.HasSuffix(path, "]") && strings.Contains(path, "channel_creds["):
		return credsFields
	case strings.HasSuffix(path, "]") && strings.Contains(path, "xds_servers["):
		return serverFields
	case strings.HasPrefix(path, "authorities["):
		return authFields
	case strings.HasPrefix(path, "certificate_providers["):
		return providerFields
	}
	return nil
}

// explainUnknown adds to err, an error about a field, the unknown members
// of the object that holds that field, if it has any: most likely one of
// them is the field, misspelt.
func explainUnknown(err error, u unknownMap) error {
	var fe *fieldError
	if len(u) == 0 || !errors.As(err, &fe) {
		return err
	}
	obj := parentPath(fe.path)
	keys := u[obj]
	if len(keys) == 0 {
		return err
	}
	var b strings.Builder
	b.WriteString(" (unknown field")
	if len(keys) > 1 {
		b.WriteString("s")
	}
	if obj == "" {
		b.WriteString(" at the top level: ")
	} else {
		b.WriteString(" in " + obj + ": ")
	}
	for i, k := range keys {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strconv.Quote(k))
		if s := closest(k, knownAt(obj)); s != "" {
			b.WriteString(", did you mean " + strconv.Quote(s) + "?")
		}
	}
	b.WriteString(")")
	return &fieldError{path: fe.path, msg: fe.msg + b.String()}
}

// parentPath returns the path of the object holding the field at path:
// "xds_servers[0].server_uri" → "xds_servers[0]", "xds_servers" → "",
// "authorities[\"a.b\"].xds_servers" → "authorities[\"a.b\"]". Indexes and
// map keys stay with their field: an error about a server
// ("xds_servers[1]") concerns the list, in the object holding it.
func parentPath(path string) string {
	depth := 0
	for i := len(path) - 1; i >= 0; i-- {
		switch path[i] {
		case ']':
			depth++
		case '[':
			depth--
		case '.':
			if depth == 0 {
				return path[:i]
			}
		}
	}
	return ""
}

// closest returns the name in known nearest to k if it is near enough to be
// a misspelling of it (an edit distance of at most a third of its length,
// letter case ignored), else "".
func closest(k string, known []string) string {
	best, bestD := "", -1
	lk := strings.ToLower(k)
	for _, name := range known {
		d := editDistance(lk, name)
		if d <= max(1, len(name)/3) && (bestD < 0 || d < bestD) {
			best, bestD = name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
