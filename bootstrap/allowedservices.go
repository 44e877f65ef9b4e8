package bootstrap

import (
	"encoding/json"
	"maps"
	"net/url"
	"slices"
)

// AllowedGRPCService is one entry of allowed_grpc_services (gRFC A102):
// the credentials to reach a side-channel service (an external
// authorization or processing server, a rate limiter) that a management
// server not marked FeatureTrustedXDSServer names in a GrpcService. Such a
// GrpcService must name a target listed here, and its own credentials are
// ignored for these.
type AllowedGRPCService struct {
	// Target is the entry's key, the target URI; Parse and
	// Config.AllowedGRPCService fill it, and errors name it.
	Target string
	// ChannelCreds lists the channel credentials, in order of preference;
	// the first of a supported type (CredsInsecure, CredsTLS,
	// CredsGoogleDefault) is used. At least one must be supported. JSON:
	// channel_creds. Required.
	ChannelCreds []ChannelCreds
	// CallCreds lists credentials added to every call, as
	// ServerConfig.CallCreds: every supported entry is used, and they
	// need a secure channel. JSON: call_creds. Optional.
	CallCreds []CallCreds
}

// AllowedGRPCService returns the entry of allowed_grpc_services for the
// target URI target, exactly as the GrpcService spells it. ok is false when
// it is not listed.
func (c *Config) AllowedGRPCService(target string) (s AllowedGRPCService, ok bool) {
	s, ok = c.AllowedGRPCServices[target]
	s.Target = target
	return s, ok
}

// ChannelCredentials builds the credentials of a channel to the service,
// as ServerConfig.ChannelCredentials does for a management server: those
// of the selected channel_creds entry, and every supported call_creds
// entry in Call. The result must be closed after the channel.
func (a AllowedGRPCService) ChannelCredentials() (*ChannelCredentials, error) {
	return a.asServer(a.Target).ChannelCredentials()
}

// asServer is the ServerConfig whose credentials are a's, so that the
// service's credentials are built and checked by the same code as a
// management server's. target names it in errors.
func (a AllowedGRPCService) asServer(target string) ServerConfig {
	return ServerConfig{ServerURI: target, ChannelCreds: a.ChannelCreds, CallCreds: a.CallCreds}
}

// decodeAllowedGRPCServices decodes allowed_grpc_services: an object
// whose keys are target URIs and whose values hold channel_creds and
// call_creds in the format of a server's.
func decodeAllowedGRPCServices(raw json.RawMessage, path string) (map[string]AllowedGRPCService, error) {
	o, err := asObject(raw, path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]AllowedGRPCService, len(o))
	for _, target := range o.sortedKeys() {
		p := mapKey(path, target)
		so, err := asObject(o[target], p)
		if err != nil {
			return nil, err
		}
		a := AllowedGRPCService{Target: target}
		if raw, ok := so.get("channel_creds"); ok {
			if a.ChannelCreds, err = decodeCredsList(raw, member(p, "channel_creds")); err != nil {
				return nil, err
			}
		}
		if raw, ok := so.get("call_creds"); ok {
			if a.CallCreds, err = decodeCallCredsList(raw, member(p, "call_creds")); err != nil {
				return nil, err
			}
		}
		out[target] = a
	}
	return out, nil
}

// validateAllowedGRPCServices checks each entry as a server's credentials
// are checked, and that each key is a fully-qualified target URI (with a
// scheme), as the gRFC says: a GrpcService's target_uri is looked up as
// written, so a key without one names a target no GrpcService can.
func validateAllowedGRPCServices(services map[string]AllowedGRPCService, path string) error {
	for _, target := range slices.Sorted(maps.Keys(services)) {
		p := mapKey(path, target)
		if u, err := url.Parse(target); target == "" || err != nil || u.Scheme == "" {
			return fieldErrorf(p, "the key must be a fully-qualified target URI, with a scheme, such as %q", "dns:///ratelimit.example.org:443")
		}
		if err := services[target].validate(p); err != nil {
			return err
		}
	}
	return nil
}

func (a AllowedGRPCService) validate(path string) error {
	s := a.asServer(path)
	if err := s.validateChannelCreds(path); err != nil {
		return err
	}
	return s.validateCallCreds(path)
}
