package bootstrap

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// Config is a bootstrap: the management servers to use and how the client
// presents itself to them. Parse, Load and FromEnv return a validated Config;
// one built in code should be checked with Validate before use. A Config is
// not modified by this package after it is returned, and is safe for
// concurrent reads.
type Config struct {
	// Servers are the top-level management servers, in order of priority:
	// the first is used, later ones only as fallbacks (gRFC A71: the client
	// moves to the next when the current one fails without answering while
	// a watched resource is not cached, and goes back as soon as a
	// higher-priority one answers). JSON: xds_servers. Required.
	Servers []ServerConfig
	// Node identifies this client to the servers. JSON: node.
	Node Node
	// Authorities maps an authority name, as used in xdstp:// resource
	// names, to its config (gRFC A47). JSON: authorities.
	Authorities map[string]Authority
	// ClientDefaultListenerResourceNameTemplate makes the Listener name for
	// a target without an authority; see ListenerResourceName. Parse sets
	// "%s" when the JSON has none, and empty means "%s" here too.
	// JSON: client_default_listener_resource_name_template.
	ClientDefaultListenerResourceNameTemplate string
	// ServerListenerResourceNameTemplate makes the Listener name of an xDS
	// enabled gRPC server. It is kept for callers and not used by goxds.
	// JSON: server_listener_resource_name_template.
	ServerListenerResourceNameTemplate string
	// CertificateProviders maps an instance name to a certificate provider
	// plugin config (gRFC A29). The config of a plugin registered with
	// grpc-go's certprovider package ("file_watcher" always is) is checked
	// by the plugin's parser when the bootstrap is validated; entries of
	// other plugins are kept and count as undefined, as in gRPC. Build them
	// with CertificateProviderConfig. JSON: certificate_providers.
	CertificateProviders map[string]CertificateProvider
	// AllowedGRPCServices maps the target URI of a side-channel service
	// to the credentials to reach it with, for GrpcServices sent by
	// servers not marked FeatureTrustedXDSServer (gRFC A102); see
	// AllowedGRPCService. JSON: allowed_grpc_services.
	AllowedGRPCServices map[string]AllowedGRPCService
	// EndpointFallback turns on gRFC A95, which gRPC keeps behind the
	// environment variable GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK (see
	// EnvEndpointFallback): an authority's FallbackOnReachabilityOnly is
	// honoured, a ClusterLoadAssignment's localities may take their
	// endpoints from LbEndpointCollection resources
	// (leds_cluster_locality_config), and the client advertises the client
	// feature xds.endpoint.supports_lb_endpoint_collection so that servers
	// know they may send those. Off, the knob is ignored and
	// leds_cluster_locality_config too (a locality keeps its lb_endpoints),
	// as before A95. Parse, Load and FromEnv set it from the environment
	// variable; not a JSON field.
	EndpointFallback bool
	// UnknownFields are the JSON paths of the fields Parse, Load or FromEnv
	// ignored because goxds does not know them, sorted, e.g.
	// ["node.user_agent", "xds_servers[0].server_feature"]; for tools to
	// warn about, since a misspelt optional field is otherwise silently
	// absent. Not read by the client or by Validate.
	UnknownFields []string
}

// Authority is the config of one xDS authority (gRFC A47).
type Authority struct {
	// ClientListenerResourceNameTemplate makes the Listener name for a
	// target that names this authority; see AuthorityListenerResourceName.
	// When set it must start with "xdstp://<authority>/", the authority
	// name percent-encoded. When empty, the gRFC A47 default
	// "xdstp://<authority>/envoy.config.listener.v3.Listener/%s" applies.
	// JSON: client_listener_resource_name_template.
	ClientListenerResourceNameTemplate string
	// Servers are the authority's management servers, in priority order,
	// later ones fallbacks as for Config.Servers. Empty means the top-level
	// Config.Servers. JSON: xds_servers.
	Servers []ServerConfig
	// FallbackOnReachabilityOnly makes the client fall back from a server
	// of this authority as soon as it cannot be reached, even with every
	// watched resource cached (gRFC A95); without it the client falls back
	// only while a watcher waits on a resource the cache lacks (gRFC A71).
	// For an authority serving endpoints, which go stale while a fallback
	// has fresher ones. Honoured only with Config.EndpointFallback.
	// JSON: fallback_on_reachability_only, a boolean.
	FallbackOnReachabilityOnly bool
}

// CertificateProvider is one entry of certificate_providers, as written.
type CertificateProvider struct {
	// PluginName names the plugin, e.g. "file_watcher". JSON: plugin_name.
	PluginName string
	// Config is the plugin's config, compacted JSON. JSON: config.
	Config json.RawMessage
}

// Validate checks c as Parse checks a file. The error names the offending
// field by its JSON path, e.g. "xds_servers[0].server_uri: must not be
// empty", so that a Config built in code and one read from a file are
// reported alike.
func (c *Config) Validate() error {
	if c == nil {
		return fmt.Errorf("bootstrap: config is nil")
	}
	if err := c.validate(); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return nil
}

func (c *Config) validate() error {
	if len(c.Servers) == 0 {
		return fieldErrorf("xds_servers", "must list at least one server")
	}
	if err := validateServers(c.Servers, "xds_servers"); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(c.Authorities)) {
		a := c.Authorities[name]
		path := mapKey("authorities", name)
		if t := a.ClientListenerResourceNameTemplate; t != "" {
			prefix := authorityPrefix(name)
			if !strings.HasPrefix(t, prefix) {
				return fieldErrorf(member(path, "client_listener_resource_name_template"),
					"%q must start with %q", t, prefix)
			}
		}
		if err := validateServers(a.Servers, member(path, "xds_servers")); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.CertificateProviders)) {
		if err := validateCertProvider(c.CertificateProviders[name], mapKey("certificate_providers", name)); err != nil {
			return err
		}
	}
	return validateAllowedGRPCServices(c.AllowedGRPCServices, "allowed_grpc_services")
}

func validateServers(servers []ServerConfig, path string) error {
	for i, s := range servers {
		if err := s.validate(index(path, i)); err != nil {
			return err
		}
	}
	return nil
}

func (s ServerConfig) validate(path string) error {
	if s.ServerURI == "" {
		return fieldErrorf(member(path, "server_uri"), "must not be empty")
	}
	if !s.APIType.known() {
		return fieldErrorf(member(path, "api_type"), "unknown value %s (want one of %s)", s.APIType, apiTypeList())
	}
	if err := s.validateSource(path); err != nil {
		return err
	}
	if err := s.validateCallCreds(path); err != nil {
		return err
	}
	if s.APIType == APITypeFilesystem {
		return nil // files need no credentials; any listed are ignored
	}
	return s.validateChannelCreds(path)
}

// validateChannelCreds checks that channel_creds has an entry goxds
// supports, and the config of that entry if it is "tls".
func (s ServerConfig) validateChannelCreds(path string) error {
	credsPath := member(path, "channel_creds")
	i := s.selectedCreds()
	if i < 0 {
		return fieldErrorf(credsPath, "%s", noSupportedCreds(s.ChannelCreds))
	}
	if c := s.ChannelCreds[i]; c.Type == CredsTLS {
		entry := index(credsPath, i)
		t, err := c.tlsCreds(entry)
		if err != nil {
			return err
		}
		return t.validate(member(entry, "config"))
	}
	return nil
}

// ServersForAuthority returns the management servers of the named
// authority: its own, or the top-level Servers if it lists none. ok is false
// if c has no such authority. The slice is shared with c and must not be
// modified.
func (c *Config) ServersForAuthority(name string) (servers []ServerConfig, ok bool) {
	a, ok := c.Authorities[name]
	if !ok {
		return nil, false
	}
	if len(a.Servers) == 0 {
		return c.Servers, true
	}
	return a.Servers, true
}

// ListenerResourceName returns the name of the Listener to subscribe to for
// a target that names no authority (the host and path of an "xds:///target"
// URI), by expanding ClientDefaultListenerResourceNameTemplate as gRFC A47
// says: each "%s" is replaced by target, percent-encoded except for "/" when
// the template starts with "xdstp:". With the default template "%s" the
// name is the target itself.
func (c *Config) ListenerResourceName(target string) string {
	t := c.ClientDefaultListenerResourceNameTemplate
	if t == "" {
		t = "%s"
	}
	return expandTemplate(t, target)
}

// AuthorityListenerResourceName is ListenerResourceName for a target that
// names an authority ("xds://authority/target"): it expands the authority's
// ClientListenerResourceNameTemplate, or the gRFC A47 default
// "xdstp://<authority>/envoy.config.listener.v3.Listener/%s". ok is false if
// c has no such authority.
func (c *Config) AuthorityListenerResourceName(authority, target string) (name string, ok bool) {
	a, ok := c.Authorities[authority]
	if !ok {
		return "", false
	}
	t := a.ClientListenerResourceNameTemplate
	if t == "" {
		t = authorityPrefix(authority) + "envoy.config.listener.v3.Listener/%s"
	}
	return expandTemplate(t, target), true
}

// ServerListenerResourceName returns the name of the Listener an
// xDS-enabled server listening on addr ("host:port", an IPv6 host in
// brackets, as net.Addr.String writes it) watches (gRFC A36): each "%s" of
// ServerListenerResourceNameTemplate replaced by addr, percent-encoded
// except for "/" when the template starts with "xdstp:" (gRFC A47). ok is
// false when the bootstrap has no template: such a bootstrap cannot
// configure a server.
func (c *Config) ServerListenerResourceName(addr string) (name string, ok bool) {
	if c.ServerListenerResourceNameTemplate == "" {
		return "", false
	}
	return expandTemplate(c.ServerListenerResourceNameTemplate, addr), true
}

// authorityPrefix is how every xdstp name of the authority starts.
func authorityPrefix(authority string) string {
	return "xdstp://" + url.PathEscape(authority) + "/"
}

func expandTemplate(template, target string) string {
	if !strings.Contains(template, "%s") {
		return template
	}
	if strings.HasPrefix(template, "xdstp:") {
		target = escapeSegments(target)
	}
	return strings.ReplaceAll(template, "%s", target)
}

// escapeSegments percent-encodes each "/"-separated segment of s for use in
// a URI path, leaving the separators alone.
func escapeSegments(s string) string {
	var b strings.Builder
	for i, seg := range strings.Split(s, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(url.PathEscape(seg))
	}
	return b.String()
}
