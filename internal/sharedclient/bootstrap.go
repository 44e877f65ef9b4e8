package sharedclient

import (
	"fmt"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
)

// Bootstrap is the bootstrap an adapter (grpcxds's Builder, httpxds's
// Transport and Server, xdsserver's server) runs with: the one its options
// give, else that of the Client they give (what its user configured once:
// the adapter must not look for a second bootstrap in the environment),
// else the environment's (bootstrap.FromEnv). The error, when none is
// found, says so and wraps FromEnv's (bootstrap.ErrNoBootstrap when the
// environment names none); the caller adds its package's prefix.
func Bootstrap(given *bootstrap.Config, c *client.Client) (*bootstrap.Config, error) {
	switch {
	case given != nil:
		return given, nil
	case c != nil:
		return c.Bootstrap(), nil
	}
	cfg, err := bootstrap.FromEnv()
	if err != nil {
		return nil, fmt.Errorf("no bootstrap or Client given, and none in the environment: %w", err)
	}
	return cfg, nil
}
