package bootstrap

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Channel credential types this package can build transport credentials for.
// Entries of any other type are kept but skipped when choosing credentials.
const (
	CredsInsecure = "insecure" // plaintext; no config
	CredsTLS      = "tls"      // TLS, configured by a [TLSCreds] (gRFC A65)
	// CredsGoogleDefault is TLS with Google's application default
	// credentials as OAuth tokens on each call (gRFC A27), what Traffic
	// Director bootstraps ask for; no config. The credentials are looked
	// up when the first connection is made, not when the bootstrap is read.
	CredsGoogleDefault = "google_default"
)

// Server features the xDS client acts on. Others are kept in
// [ServerConfig.ServerFeatures] and ignored.
const (
	// FeatureXDSV3 asks for the v3 transport protocol. goxds speaks only v3,
	// so the feature changes nothing; it is listed because generators write it.
	FeatureXDSV3 = "xds_v3"
	// FeatureIgnoreResourceDeletion asked the client to keep a Listener or
	// Cluster that the server stops sending (gRFC A53). gRFC A88
	// deprecates it: keeping it is now what the client does for every
	// server not marked FeatureFailOnDataErrors, so the feature is parsed
	// and changes nothing.
	FeatureIgnoreResourceDeletion = "ignore_resource_deletion"
	// FeatureTrustedXDSServer marks the server as trusted to send fields
	// that affect security (gRFC A81).
	FeatureTrustedXDSServer = "trusted_xds_server"
	// FeatureFailOnDataErrors tells the client to drop what it holds of a
	// resource on a data error (gRFC A88): a NACK, the deletion of a
	// Listener or Cluster, or resource_errors with NOT_FOUND or
	// PERMISSION_DENIED. Its watchers then get a resource error instead of
	// an ambient one. For servers that cannot be relied on to alert
	// operators themselves.
	FeatureFailOnDataErrors = "fail_on_data_errors"
	// FeatureResourceTimerIsTransientFailure marks a server that reports
	// missing resources itself (resource_errors): the does-not-exist timer
	// then runs twice as long and its expiry means the server is slow
	// (UNAVAILABLE, status TIMEOUT), not that the resource does not exist
	// (gRFC A88).
	FeatureResourceTimerIsTransientFailure = "resource_timer_is_transient_failure"
)

// ServerConfig describes one management server: the JSON object found in
// xds_servers and in an authority's xds_servers.
type ServerConfig struct {
	// ServerURI is the gRPC target of the server, e.g.
	// "trafficdirector.googleapis.com:443". JSON: server_uri. Required.
	ServerURI string
	// ChannelCreds lists the credentials the server accepts, in order of
	// preference; the first whose Type is CredsInsecure, CredsTLS or
	// CredsGoogleDefault is used
	// (see SelectedCreds). JSON: channel_creds. At least one must be usable.
	ChannelCreds []ChannelCreds
	// CallCreds lists credentials sent on every call to the server, on top
	// of the channel's (gRFC A97): every entry of a supported type
	// (CallCredsJWTTokenFile) is used, others are ignored. Supported ones
	// need a secure channel: the selected ChannelCreds must not be
	// CredsInsecure. Not for APITypeREST; ignored by APITypeFilesystem.
	// JSON: call_creds. Optional.
	CallCreds []CallCreds
	// ServerFeatures lists the features of the server, such as
	// FeatureIgnoreResourceDeletion. Unknown ones are kept and ignored.
	// JSON: server_features.
	ServerFeatures []string
	// APIType selects the protocol spoken to the server. The zero value is
	// APITypeAggregatedGRPC. JSON: api_type (a goxds extension; see the
	// package documentation).
	APIType APIType
	// APITypePerType overrides APIType for some resource types, keyed by
	// type URL: a gRPC server may serve, say, endpoints on their own delta
	// stream (APITypeDeltaGRPC) and everything else over ADS. Only for a
	// gRPC APIType, and only gRPC values. JSON: api_type_per_type (goxds).
	APITypePerType map[string]APIType
	// ResourceFiles names, for an APITypeFilesystem server, the file that
	// holds each type's DiscoveryResponse, keyed by type URL. A relative
	// path is relative to the directory ServerURI names. Required for
	// APITypeFilesystem, and only for it. JSON: resource_files (goxds).
	ResourceFiles map[string]string
	// RefreshDelay is, for APITypeREST, how long to wait before polling
	// again after an answer that changed nothing (HTTP 304); for
	// APITypeFilesystem, how often to look at the files when the file
	// system cannot report changes. Zero: DefaultRefreshDelay. JSON:
	// refresh_delay, a Duration string such as "1s" (goxds).
	RefreshDelay time.Duration
	// RequestTimeout bounds one REST request, the time a server holds a
	// long poll included; a request that times out counts as a failure.
	// Zero: DefaultRequestTimeout. APITypeREST only. JSON: request_timeout
	// (goxds).
	RequestTimeout time.Duration
}

// ChannelCreds is one entry of a server's channel_creds list.
type ChannelCreds struct {
	// Type names the kind of credentials: CredsInsecure, CredsTLS,
	// CredsGoogleDefault, or a type this package does not support, which is
	// skipped when choosing. JSON: type.
	Type string
	// Config is the entry's config as written in the JSON, compacted, or nil
	// if it had none. It is kept for every type; for a "tls" entry it is read
	// only when TLS is nil.
	Config json.RawMessage
	// TLS is the decoded config of a "tls" entry. Parse fills it for the
	// entry it selects. When nil, a "tls" entry is configured by decoding
	// Config, and an empty Config means system roots and no client
	// certificate.
	TLS *TLSCreds
}

// TLSCreds is the config of a "tls" channel_creds entry (gRFC A65). All
// fields are optional: with none set, the server is verified against the
// system roots and no client certificate is sent.
type TLSCreds struct {
	// CACertificateFile is a PEM file of roots to verify the server with,
	// instead of the system roots. JSON: ca_certificate_file.
	CACertificateFile string
	// CertificateFile and PrivateKeyFile are the PEM client certificate
	// chain and its key, for mutual TLS. Both or neither must be set.
	// JSON: certificate_file, private_key_file.
	CertificateFile string
	PrivateKeyFile  string
	// RefreshInterval is how often the files are read again by the
	// credentials ChannelCredentials builds, so that rotated files are used
	// by the next connection without a restart; zero means gRPC's default,
	// ten minutes. JSON: refresh_interval, a protobuf Duration string such
	// as "600s".
	RefreshInterval time.Duration
}

// IgnoreResourceDeletion reports whether the server lists
// FeatureIgnoreResourceDeletion, which the client no longer acts on (gRFC
// A88).
func (s ServerConfig) IgnoreResourceDeletion() bool {
	return slices.Contains(s.ServerFeatures, FeatureIgnoreResourceDeletion)
}

// FailOnDataErrors reports whether the server lists FeatureFailOnDataErrors.
func (s ServerConfig) FailOnDataErrors() bool {
	return slices.Contains(s.ServerFeatures, FeatureFailOnDataErrors)
}

// ResourceTimerIsTransientFailure reports whether the server lists
// FeatureResourceTimerIsTransientFailure.
func (s ServerConfig) ResourceTimerIsTransientFailure() bool {
	return slices.Contains(s.ServerFeatures, FeatureResourceTimerIsTransientFailure)
}

// TrustedXDSServer reports whether the server lists FeatureTrustedXDSServer.
func (s ServerConfig) TrustedXDSServer() bool {
	return slices.Contains(s.ServerFeatures, FeatureTrustedXDSServer)
}

// SelectedCreds returns the first entry of ChannelCreds whose type this
// package supports, or the zero ChannelCreds if there is none (which
// Validate reports as an error).
func (s ServerConfig) SelectedCreds() ChannelCreds {
	if i := s.selectedCreds(); i >= 0 {
		return s.ChannelCreds[i]
	}
	return ChannelCreds{}
}

// selectedCreds returns the index of the entry SelectedCreds returns, or -1.
func (s ServerConfig) selectedCreds() int {
	return selectCreds(s.ChannelCreds)
}

// selectCreds returns the index of the first entry of a supported type, or -1.
func selectCreds(creds []ChannelCreds) int {
	return slices.IndexFunc(creds, func(c ChannelCreds) bool {
		return c.Type == CredsInsecure || c.Type == CredsTLS || c.Type == CredsGoogleDefault
	})
}

// String describes the server for logs, e.g.
// "xds.example.com:443 [creds=tls api_type=AGGREGATED_GRPC features=xds_v3]".
// It names no files and no secrets.
func (s ServerConfig) String() string {
	creds := s.SelectedCreds().Type
	if creds == "" {
		creds = "none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s [creds=%s api_type=%s%s", s.ServerURI, creds, s.APIType, s.describeSource())
	if cc := s.callCredsTypes(); len(cc) > 0 {
		fmt.Fprintf(&b, " call_creds=%s", strings.Join(cc, ","))
	}
	if len(s.ServerFeatures) > 0 {
		fmt.Fprintf(&b, " features=%s", strings.Join(s.ServerFeatures, ","))
	}
	b.WriteString("]")
	return b.String()
}

// Key returns a string that is equal for two servers exactly when one
// connection can serve both: same URI, same selected credentials and
// credential settings, same set of features (order and repeats do not
// count), same call credentials, same APIType and same settings of the API types (per-type
// overrides, files, refresh delay, request timeout). Entries of ChannelCreds after the selected one
// play no part. Use it as a map key to share one transport per server.
func (s ServerConfig) Key() string {
	parts := []string{strconv.Quote(s.ServerURI)}
	parts = append(parts, s.credsKey()...)
	parts = append(parts, s.callCredsKey()...)
	features := slices.Clone(s.ServerFeatures)
	slices.Sort(features)
	features = slices.Compact(features)
	for i, f := range features {
		features[i] = strconv.Quote(f)
	}
	parts = append(parts, "["+strings.Join(features, ",")+"]", s.APIType.String())
	parts = append(parts, s.sourceKey()...)
	return strings.Join(parts, ";")
}

func (s ServerConfig) credsKey() []string {
	i := s.selectedCreds()
	if i < 0 {
		return []string{"none"}
	}
	c := s.ChannelCreds[i]
	if c.Type == CredsInsecure || c.Type == CredsGoogleDefault {
		return []string{c.Type}
	}
	t, err := c.tlsCreds("")
	if err != nil {
		// Only an invalid config gets here; keep the key distinct anyway.
		return []string{CredsTLS, "invalid", strconv.Quote(string(compact(c.Config)))}
	}
	return []string{
		CredsTLS,
		strconv.Quote(t.CACertificateFile),
		strconv.Quote(t.CertificateFile),
		strconv.Quote(t.PrivateKeyFile),
		t.RefreshInterval.String(),
	}
}

// tlsCreds returns the settings of a "tls" entry: TLS when set, otherwise
// Config decoded. path locates the entry in errors.
func (c ChannelCreds) tlsCreds(path string) (TLSCreds, error) {
	if c.TLS != nil {
		return *c.TLS, nil
	}
	t, err := decodeTLSCreds(c.Config, member(path, "config"))
	if err != nil {
		return TLSCreds{}, err
	}
	return *t, nil
}
