package testutils

import (
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Values of a server's "api_type", the goxds extension to the gRFC A27
// bootstrap that picks the protocol spoken to that server.
const (
	APITypeSotW         = "AGGREGATED_GRPC"       // SotW ADS
	APITypeDelta        = "AGGREGATED_DELTA_GRPC" // delta ADS
	APITypeSotWPerType  = "GRPC"                  // SotW, one stream per type
	APITypeDeltaPerType = "DELTA_GRPC"            // delta, one stream per type
	APITypeREST         = "REST"                  // REST-JSON polling; the URI is http://
	APITypeFilesystem   = "FILESYSTEM"            // files; the URI is a directory
)

// BootstrapOptions describes the bootstrap BootstrapJSON writes. Every server
// gets insecure channel credentials.
type BootstrapOptions struct {
	// ServerURI, APIType and ServerFeatures describe the first server of
	// "xds_servers". An empty ServerURI leaves it out. An empty APIType omits
	// "api_type" (the bootstrap's default then applies); nil ServerFeatures
	// omits "server_features".
	ServerURI      string
	APIType        string
	ServerFeatures []string
	// APITypePerType, ResourceFiles and RefreshDelay are the first
	// server's "api_type_per_type", "resource_files" and "refresh_delay";
	// nil or zero omits them.
	APITypePerType map[string]string
	ResourceFiles  map[string]string
	RefreshDelay   time.Duration
	// FallbackServers follow the first server in "xds_servers", in priority
	// order (gRFC A71).
	FallbackServers []BootstrapServer
	// NodeID is "node.id"; "" omits "node".
	NodeID string
	// Authorities is "authorities" (gRFC A47); nil omits it.
	Authorities map[string]BootstrapAuthority
	// ClientDefaultListenerResourceNameTemplate is the top-level
	// "client_default_listener_resource_name_template"; "" omits it.
	ClientDefaultListenerResourceNameTemplate string
}

// BootstrapServer is one entry of an "xds_servers" list.
type BootstrapServer struct {
	URI            string
	APIType        string            // "" omits "api_type"
	ServerFeatures []string          // nil omits "server_features"
	APITypePerType map[string]string // nil omits "api_type_per_type"
	ResourceFiles  map[string]string // nil omits "resource_files"
	RefreshDelay   time.Duration     // 0 omits "refresh_delay"
}

// BootstrapAuthority is one entry of "authorities".
type BootstrapAuthority struct {
	// ClientListenerResourceNameTemplate is the authority's
	// "client_listener_resource_name_template"; "" omits it.
	ClientListenerResourceNameTemplate string
	// Servers is the authority's "xds_servers"; nil omits it, so the
	// top-level servers apply.
	Servers []BootstrapServer
	// FallbackOnReachabilityOnly is the authority's
	// "fallback_on_reachability_only" (gRFC A95); false omits it.
	FallbackOnReachabilityOnly bool
}

// The JSON shapes, field for field as gRFC A27 and A47 spell them.
type (
	bootstrapJSON struct {
		XDSServers      []serverJSON             `json:"xds_servers"`
		Node            *nodeJSON                `json:"node,omitempty"`
		Authorities     map[string]authorityJSON `json:"authorities,omitempty"`
		DefaultTemplate string                   `json:"client_default_listener_resource_name_template,omitempty"`
	}
	serverJSON struct {
		ServerURI      string            `json:"server_uri"`
		ChannelCreds   []credsJSON       `json:"channel_creds"`
		ServerFeatures []string          `json:"server_features,omitempty"`
		APIType        string            `json:"api_type,omitempty"`
		APITypePerType map[string]string `json:"api_type_per_type,omitempty"`
		ResourceFiles  map[string]string `json:"resource_files,omitempty"`
		RefreshDelay   string            `json:"refresh_delay,omitempty"`
	}
	credsJSON struct {
		Type string `json:"type"`
	}
	nodeJSON struct {
		ID string `json:"id"`
	}
	authorityJSON struct {
		Template   string       `json:"client_listener_resource_name_template,omitempty"`
		XDSServers []serverJSON `json:"xds_servers,omitempty"`
		Knob       bool         `json:"fallback_on_reachability_only,omitempty"`
	}
)

// BootstrapJSON writes opts as bootstrap JSON, indented, for
// GRPC_XDS_BOOTSTRAP_CONFIG, a bootstrap file, or the bootstrap package's
// parser.
func BootstrapJSON(opts BootstrapOptions) []byte {
	b := bootstrapJSON{
		XDSServers:      []serverJSON{},
		DefaultTemplate: opts.ClientDefaultListenerResourceNameTemplate,
	}
	if opts.ServerURI != "" {
		b.XDSServers = append(b.XDSServers, serverJSONOf(BootstrapServer{
			URI:            opts.ServerURI,
			APIType:        opts.APIType,
			ServerFeatures: opts.ServerFeatures,
			APITypePerType: opts.APITypePerType,
			ResourceFiles:  opts.ResourceFiles,
			RefreshDelay:   opts.RefreshDelay,
		}))
	}
	b.XDSServers = append(b.XDSServers, serversJSON(opts.FallbackServers)...)
	if opts.NodeID != "" {
		b.Node = &nodeJSON{ID: opts.NodeID}
	}
	if opts.Authorities != nil {
		b.Authorities = make(map[string]authorityJSON, len(opts.Authorities))
		for name, a := range opts.Authorities {
			b.Authorities[name] = authorityJSON{
				Template:   a.ClientListenerResourceNameTemplate,
				XDSServers: serversJSON(a.Servers),
				Knob:       a.FallbackOnReachabilityOnly,
			}
		}
	}
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil { // only strings, slices and maps of them: cannot happen
		panic(fmt.Sprintf("testutils: encoding the bootstrap: %v", err))
	}
	return out
}

func serversJSON(servers []BootstrapServer) []serverJSON {
	var out []serverJSON
	for _, s := range servers {
		out = append(out, serverJSONOf(s))
	}
	return out
}

func serverJSONOf(s BootstrapServer) serverJSON {
	out := serverJSON{
		ServerURI:      s.URI,
		ChannelCreds:   []credsJSON{{Type: "insecure"}},
		ServerFeatures: s.ServerFeatures,
		APIType:        s.APIType,
		APITypePerType: s.APITypePerType,
		ResourceFiles:  s.ResourceFiles,
	}
	if s.RefreshDelay != 0 {
		b, _ := protojson.Marshal(durationpb.New(s.RefreshDelay))
		_ = json.Unmarshal(b, &out.RefreshDelay) // a JSON string such as "0.050s"
	}
	return out
}
