package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
)

// bootstrapReport is what a bootstrap means, as printed by `goxds
// bootstrap` (and, with -json, its JSON form).
type bootstrapReport struct {
	Source  string         `json:"source"`
	Servers []serverReport `json:"xds_servers"`
	// Node is the node as the client sends it, client features and user
	// agent included, in the protobuf JSON mapping.
	Node                                      json.RawMessage               `json:"node"`
	Authorities                               map[string]authorityReport    `json:"authorities,omitempty"`
	ClientDefaultListenerResourceNameTemplate string                        `json:"client_default_listener_resource_name_template"`
	ServerListenerResourceNameTemplate        string                        `json:"server_listener_resource_name_template,omitempty"`
	CertificateProviders                      map[string]certProviderReport `json:"certificate_providers,omitempty"`
	// EndpointFallback: gRFC A95 is on (GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK
	// is "true"), so authorities' fallback_on_reachability_only is honoured.
	EndpointFallback bool `json:"endpoint_fallback"`
	// UnknownFields are the JSON paths of fields goxds ignored, as gRPC
	// does: a misspelt optional field is otherwise silently absent.
	UnknownFields []string `json:"unknown_fields,omitempty"`
}

type serverReport struct {
	ServerURI      string            `json:"server_uri"`
	ChannelCreds   string            `json:"channel_creds"`
	TLS            map[string]string `json:"tls,omitempty"`
	APIType        string            `json:"api_type"`
	APITypePerType map[string]string `json:"api_type_per_type,omitempty"`
	ServerFeatures []string          `json:"server_features,omitempty"`
	ResourceFiles  map[string]string `json:"resource_files,omitempty"`
}

type authorityReport struct {
	ClientListenerResourceNameTemplate string `json:"client_listener_resource_name_template"`
	// Servers are the authority's own, empty when it uses the top-level
	// ones.
	Servers []serverReport `json:"xds_servers,omitempty"`
	// FallbackOnReachabilityOnly is the authority's gRFC A95 knob, as
	// written; it counts only with bootstrapReport.EndpointFallback.
	FallbackOnReachabilityOnly bool `json:"fallback_on_reachability_only,omitempty"`
}

type certProviderReport struct {
	PluginName string          `json:"plugin_name"`
	Config     json.RawMessage `json:"config,omitempty"`
	// Error says why the instance cannot be built (its plugin is not
	// registered): a cluster naming it is refused.
	Error string `json:"error,omitempty"`
}

const bootstrapSynopsis = "[-json] [file]"

func runBootstrap(_ context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bootstrap", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args, bootstrapSynopsis, out); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return badInputf("one bootstrap file at most, got %d arguments", fs.NArg())
	}
	cfg, source, err := loadBootstrap(fs.Arg(0))
	if err != nil {
		return err
	}
	// The client checks what the bootstrap package leaves to it, and makes
	// the node it sends: a bootstrap that loads but makes no client is
	// reported as bad as one that does not load.
	c, err := client.New(cfg, client.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("%s: a client refuses it: %w", source, err)
	}
	node := c.Node()
	c.Close()
	rep := describeBootstrap(cfg, source)
	js, err := protojson.Marshal(node)
	if err != nil {
		return fmt.Errorf("printing the node: %w", err)
	}
	// protojson varies its spacing on purpose; the report is stable.
	var compact bytes.Buffer
	if err := json.Compact(&compact, js); err != nil {
		return fmt.Errorf("printing the node: %w", err)
	}
	rep.Node = compact.Bytes()
	if *asJSON {
		return printJSON(out, rep)
	}
	printBootstrap(out, rep)
	return nil
}

// loadBootstrap loads the file at path as client programs do (bootstrap.Load
// checks the TLS files too), or with no path the one the environment names.
// source says where it came from, for messages.
func loadBootstrap(path string) (cfg *bootstrap.Config, source string, err error) {
	if path != "" {
		cfg, err = bootstrap.Load(path)
		return cfg, path, err
	}
	cfg, err = bootstrap.FromEnv()
	if errors.Is(err, bootstrap.ErrNoBootstrap) {
		return nil, "", badInputf("no bootstrap: give a file, or set %s or %s", bootstrap.EnvFile, bootstrap.EnvConfig)
	}
	return cfg, "the environment", err
}

func describeBootstrap(cfg *bootstrap.Config, source string) *bootstrapReport {
	rep := &bootstrapReport{
		Source: source,
		ClientDefaultListenerResourceNameTemplate: cmp.Or(cfg.ClientDefaultListenerResourceNameTemplate, "%s"),
		ServerListenerResourceNameTemplate:        cfg.ServerListenerResourceNameTemplate,
		UnknownFields:                             cfg.UnknownFields,
		EndpointFallback:                          cfg.EndpointFallback,
	}
	for _, s := range cfg.Servers {
		rep.Servers = append(rep.Servers, describeServer(s))
	}
	for name, a := range cfg.Authorities {
		if rep.Authorities == nil {
			rep.Authorities = make(map[string]authorityReport)
		}
		// Empty: the gRFC A47 default, spelt out as the bootstrap
		// package documents it.
		tmpl := cmp.Or(a.ClientListenerResourceNameTemplate, "xdstp://"+name+"/envoy.config.listener.v3.Listener/%s")
		ar := authorityReport{ClientListenerResourceNameTemplate: tmpl, FallbackOnReachabilityOnly: a.FallbackOnReachabilityOnly}
		for _, s := range a.Servers {
			ar.Servers = append(ar.Servers, describeServer(s))
		}
		rep.Authorities[name] = ar
	}
	for name, p := range cfg.CertificateProviders {
		if rep.CertificateProviders == nil {
			rep.CertificateProviders = make(map[string]certProviderReport)
		}
		pr := certProviderReport{PluginName: p.PluginName, Config: p.Config}
		if _, err := cfg.CertificateProviderConfig(name); err != nil {
			pr.Error = err.Error()
		}
		rep.CertificateProviders[name] = pr
	}
	return rep
}

func describeServer(s bootstrap.ServerConfig) serverReport {
	creds := s.SelectedCreds()
	r := serverReport{
		ServerURI:      s.ServerURI,
		ChannelCreds:   creds.Type,
		APIType:        s.APIType.String(),
		ServerFeatures: s.ServerFeatures,
	}
	if t := creds.TLS; t != nil {
		r.TLS = make(map[string]string)
		for k, v := range map[string]string{
			"ca_certificate_file": t.CACertificateFile,
			"certificate_file":    t.CertificateFile,
			"private_key_file":    t.PrivateKeyFile,
		} {
			if v != "" {
				r.TLS[k] = v
			}
		}
		if t.RefreshInterval != 0 {
			r.TLS["refresh_interval"] = t.RefreshInterval.String()
		}
	}
	for typeURL, api := range s.APITypePerType {
		if r.APITypePerType == nil {
			r.APITypePerType = make(map[string]string)
		}
		r.APITypePerType[typeURL] = api.String()
	}
	for typeURL := range s.ResourceFiles {
		if r.ResourceFiles == nil {
			r.ResourceFiles = make(map[string]string)
		}
		r.ResourceFiles[typeURL], _ = s.FilePath(typeURL)
	}
	return r
}

// featureMeaning says what the client does with the server features it
// knows, for the text report.
var featureMeaning = map[string]string{
	bootstrap.FeatureXDSV3:                           "v3 protocol (the only one goxds speaks)",
	bootstrap.FeatureIgnoreResourceDeletion:          "read and ignored: keeping deleted resources is the default (gRFC A88)",
	bootstrap.FeatureTrustedXDSServer:                "trusted with security-sensitive fields (gRFC A81)",
	bootstrap.FeatureFailOnDataErrors:                "a NACK or a deletion drops the value held (gRFC A88)",
	bootstrap.FeatureResourceTimerIsTransientFailure: "a missing resource is the server being slow, after twice the timer (gRFC A88)",
}

func printBootstrap(w io.Writer, r *bootstrapReport) {
	fmt.Fprintf(w, "bootstrap from %s: valid\n", r.Source)
	if len(r.UnknownFields) > 0 {
		fmt.Fprintf(w, "unknown fields, ignored as gRPC ignores them (a typo?): %s\n", strings.Join(r.UnknownFields, ", "))
	}
	fmt.Fprintln(w, "xds_servers (in priority order; later ones are fallbacks, gRFC A71):")
	printServers(w, "  ", r.Servers)
	fmt.Fprintln(w, "node, as the client sends it:")
	fmt.Fprintf(w, "  %s\n", r.Node)
	fmt.Fprintf(w, "client_default_listener_resource_name_template: %q\n", r.ClientDefaultListenerResourceNameTemplate)
	if r.ServerListenerResourceNameTemplate == "" {
		fmt.Fprintln(w, "server_listener_resource_name_template: none (this bootstrap cannot configure an xDS-enabled server)")
	} else {
		fmt.Fprintf(w, "server_listener_resource_name_template: %q\n", r.ServerListenerResourceNameTemplate)
	}
	if len(r.Authorities) == 0 {
		fmt.Fprintln(w, "authorities: none (xdstp:// names cannot be watched)")
	} else {
		fmt.Fprintln(w, "authorities:")
		for _, name := range slices.Sorted(maps.Keys(r.Authorities)) {
			a := r.Authorities[name]
			fmt.Fprintf(w, "  %q: listener names %q\n", name, a.ClientListenerResourceNameTemplate)
			switch {
			case a.FallbackOnReachabilityOnly && r.EndpointFallback:
				fmt.Fprintln(w, "    fallback_on_reachability_only: falls back as soon as its server cannot be reached, cached or not (gRFC A95)")
			case a.FallbackOnReachabilityOnly:
				fmt.Fprintln(w, "    fallback_on_reachability_only: ignored, as GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK is not \"true\" (gRFC A95)")
			}
			if len(a.Servers) == 0 {
				fmt.Fprintln(w, "    servers: the top-level xds_servers")
				continue
			}
			printServers(w, "    ", a.Servers)
		}
	}
	if len(r.CertificateProviders) == 0 {
		fmt.Fprintln(w, "certificate_providers: none (resources asking for TLS from a provider are refused)")
		return
	}
	fmt.Fprintln(w, "certificate_providers:")
	for _, name := range slices.Sorted(maps.Keys(r.CertificateProviders)) {
		p := r.CertificateProviders[name]
		fmt.Fprintf(w, "  %q: plugin %q, config %s\n", name, p.PluginName, cmp.Or(string(p.Config), "{}"))
		if p.Error != "" {
			fmt.Fprintf(w, "    unusable: %s\n", p.Error)
		}
	}
}

func printServers(w io.Writer, indent string, servers []serverReport) {
	for i, s := range servers {
		fmt.Fprintf(w, "%s[%d] %s\n", indent, i, s.ServerURI)
		creds := s.ChannelCreds
		for _, k := range slices.Sorted(maps.Keys(s.TLS)) {
			creds += fmt.Sprintf(" %s=%s", k, s.TLS[k])
		}
		fmt.Fprintf(w, "%s    channel_creds: %s\n", indent, creds)
		fmt.Fprintf(w, "%s    api_type: %s\n", indent, s.APIType)
		for _, t := range slices.Sorted(maps.Keys(s.APITypePerType)) {
			fmt.Fprintf(w, "%s    api_type for %s: %s\n", indent, t, s.APITypePerType[t])
		}
		for _, t := range slices.Sorted(maps.Keys(s.ResourceFiles)) {
			fmt.Fprintf(w, "%s    file for %s: %s\n", indent, t, s.ResourceFiles[t])
		}
		if len(s.ServerFeatures) == 0 {
			fmt.Fprintf(w, "%s    server_features: none\n", indent)
		}
		for _, f := range s.ServerFeatures {
			fmt.Fprintf(w, "%s    server_feature %s: %s\n", indent, f, cmp.Or(featureMeaning[f], "not known to goxds, ignored"))
		}
	}
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
