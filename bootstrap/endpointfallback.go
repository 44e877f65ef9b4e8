package bootstrap

import (
	"encoding/json"
	"os"
	"strings"
)

// EnvEndpointFallback names the environment variable that turns on gRFC
// A95 (xDS endpoint fallback): Parse, Load and FromEnv set
// Config.EndpointFallback when it is "true" (in any case), as gRPC reads its
// experimental switches. The gRFC puts all of A95 behind it until the
// feature has passed gRPC's interop tests.
const EnvEndpointFallback = "GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK"

// endpointFallbackFromEnv reports whether EnvEndpointFallback is set to
// "true". Read at each parse, not once per process, so that a program (or
// a test) that sets it before reading its bootstrap gets what it set.
func endpointFallbackFromEnv() bool {
	return strings.EqualFold(os.Getenv(EnvEndpointFallback), "true")
}

// fallbackKnob is the JSON name of Authority.FallbackOnReachabilityOnly.
const fallbackKnob = "fallback_on_reachability_only"

// asBool decodes raw as a JSON boolean; path locates it for the error.
func asBool(raw json.RawMessage, path string) (bool, error) {
	var b bool
	if k := kindOf(raw); k != "boolean" || json.Unmarshal(raw, &b) != nil {
		return false, fieldErrorf(path, "must be a boolean, got %s", k)
	}
	return b, nil
}

// boolean returns the boolean member key of o, false if it is absent.
func (o object) boolean(key, path string) (bool, error) {
	raw, ok := o.get(key)
	if !ok {
		return false, nil
	}
	return asBool(raw, path)
}
