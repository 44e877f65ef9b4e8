package sharedclient

import (
	"errors"
	"strings"
	"testing"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/testutils"
)

// TestBootstrap: the options' bootstrap wins, then the Client's, then the
// environment's; with none, the error says so and wraps
// bootstrap.ErrNoBootstrap.
func TestBootstrap(t *testing.T) {
	parse := func(uri string) *bootstrap.Config {
		t.Helper()
		cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: uri}))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	given := parse("given:1")
	c, err := client.New(parse("client:1"), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Setenv(bootstrap.EnvFile, "")
	t.Setenv(bootstrap.EnvConfig, string(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "env:1"})))

	for _, tc := range []struct {
		name   string
		given  *bootstrap.Config
		client *client.Client
		want   string
	}{
		{"options' bootstrap over the Client's", given, c, "given:1"},
		{"the Client's over the environment's", nil, c, "client:1"},
		{"the environment's", nil, nil, "env:1"},
	} {
		cfg, err := Bootstrap(tc.given, tc.client)
		if err != nil || cfg.Servers[0].ServerURI != tc.want {
			t.Errorf("%s: %v, %v; want the bootstrap of %s", tc.name, cfg, err, tc.want)
		}
	}

	t.Setenv(bootstrap.EnvConfig, "")
	if _, err := Bootstrap(nil, nil); !errors.Is(err, bootstrap.ErrNoBootstrap) || !strings.Contains(err.Error(), "no bootstrap or Client given, and none in the environment") {
		t.Errorf("Bootstrap with none anywhere: %v; want an error saying so, wrapping bootstrap.ErrNoBootstrap", err)
	}
}
