package bootstrap_test

import (
	"testing"

	"github.com/goxds/xds/bootstrap"
)

// TestFallbackOnReachabilityOnly: gRFC A95's per-authority knob is read
// as a boolean, is not an unknown field, and a value of another kind is an
// error naming the field.
func TestFallbackOnReachabilityOnly(t *testing.T) {
	doc := `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}],
	  "authorities": {"on": {"fallback_on_reachability_only": true}, "off": {"fallback_on_reachability_only": false}, "unset": {}}}`
	c, err := bootstrap.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"on": true, "off": false, "unset": false} {
		if got := c.Authorities[name].FallbackOnReachabilityOnly; got != want {
			t.Errorf("authority %q: FallbackOnReachabilityOnly = %v, want %v", name, got, want)
		}
	}
	if len(c.UnknownFields) != 0 {
		t.Errorf("UnknownFields = %q, want none", c.UnknownFields)
	}
	for value, kind := range map[string]string{`"true"`: "string", `1`: "number", `{}`: "object", `[true]`: "array"} {
		bad := `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}],
		  "authorities": {"a.example.com": {"fallback_on_reachability_only": ` + value + `}}}`
		_, err := bootstrap.Parse([]byte(bad))
		want := `bootstrap: authorities["a.example.com"].fallback_on_reachability_only: must be a boolean, got ` + kind
		if err == nil || err.Error() != want {
			t.Errorf("Parse(knob %s) error = %v, want %q", value, err, want)
		}
	}
}

// TestEndpointFallbackEnv: Config.EndpointFallback follows
// GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK, "true" in any case, at each
// parse.
func TestEndpointFallbackEnv(t *testing.T) {
	for value, want := range map[string]bool{"": false, "true": true, "TRUE": true, "True": true, "false": false, "1": false, "yes": false} {
		t.Setenv(bootstrap.EnvEndpointFallback, value)
		c, err := bootstrap.Parse([]byte(serverJSON("s:1")))
		if err != nil {
			t.Fatal(err)
		}
		if c.EndpointFallback != want {
			t.Errorf("%s=%q: EndpointFallback = %v, want %v", bootstrap.EnvEndpointFallback, value, c.EndpointFallback, want)
		}
		t.Setenv(bootstrap.EnvConfig, serverJSON("s:1"))
		t.Setenv(bootstrap.EnvFile, "")
		if c, err := bootstrap.FromEnv(); err != nil || c.EndpointFallback != want {
			t.Errorf("%s=%q: FromEnv() = %+v, %v; want EndpointFallback %v", bootstrap.EnvEndpointFallback, value, c, err, want)
		}
	}
}
