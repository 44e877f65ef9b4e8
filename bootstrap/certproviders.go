package bootstrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/credentials/tls/certprovider"
	// The "file_watcher" plugin of gRFC A29, registered with certprovider
	// by importing it: bootstraps name it, and every goxds user should be
	// able to rely on it as on grpc-go.
	_ "google.golang.org/grpc/credentials/tls/certprovider/pemfile"
)

// ErrUnknownCertificateProvider is wrapped by the errors of
// [Config.CertificateProviderConfig] for an instance the bootstrap does not
// define, or whose plugin is not registered with grpc-go's certprovider
// package.
var ErrUnknownCertificateProvider = errors.New("certificate provider instance not defined")

// unregisteredPrefix starts the error certprovider.ParseConfig returns for
// a plugin nobody registered. The registry's lookup is not public, so this
// is how an unknown plugin (ignored, as gRPC ignores it) is told from a
// known plugin's config error (a bootstrap error); TestCertificateProviders
// holds the text to what grpc-go says.
const unregisteredPrefix = "no certificate provider builder found"

// parse hands the entry's config to its plugin's ParseConfig. ok is false
// when the plugin is not registered. path locates the config in errors
// about fields goxds reads itself (a *fieldError); the plugin's own errors
// do not name it.
func (p CertificateProvider) parse(path string) (bc *certprovider.BuildableConfig, ok bool, err error) {
	cfg := p.Config
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}") // the plugin says what it misses
	}
	if p.PluginName == fileWatcherPlugin {
		if bc, ok, err := fileWatcherWithSPIFFE(cfg, path); ok {
			return bc, true, err
		}
	}
	bc, err = certprovider.ParseConfig(p.PluginName, cfg)
	if err != nil && strings.HasPrefix(err.Error(), unregisteredPrefix) {
		return nil, false, nil
	}
	return bc, true, err
}

// validateCertProvider checks one certificate_providers entry: its config
// must be JSON, and the plugin's own parser must accept it when the plugin
// is registered. An entry of an unregistered plugin is valid, as in gRPC:
// it is as good as absent, and only a cluster naming it fails.
func validateCertProvider(p CertificateProvider, path string) error {
	if len(p.Config) > 0 && !json.Valid(p.Config) {
		return fieldErrorf(member(path, "config"), "not valid JSON")
	}
	if _, _, err := p.parse(member(path, "config")); err != nil {
		if errors.As(err, new(*fieldError)) {
			return err
		}
		return fieldErrorf(member(path, "config"), "plugin %q: %v", p.PluginName, err)
	}
	return nil
}

// CertificateProviderConfig returns the certificate provider instance
// named instance, ready to build through grpc-go's certprovider package
// (gRFC A29): clusters and listeners name instances, the bootstrap says
// what each is. Builds of equal configs share one provider (certprovider
// counts references); each Provider built must be closed.
//
// An instance that certificate_providers does not list, or whose plugin is
// not registered (only "file_watcher" is built in), is an error wrapping
// ErrUnknownCertificateProvider: a connection that asked for it must not be
// made without it.
func (c *Config) CertificateProviderConfig(instance string) (*certprovider.BuildableConfig, error) {
	p, ok := c.CertificateProviders[instance]
	if !ok {
		return nil, fmt.Errorf("bootstrap: certificate_providers has no instance %q: %w", instance, ErrUnknownCertificateProvider)
	}
	path := member(mapKey("certificate_providers", instance), "config")
	bc, ok, err := p.parse(path)
	switch {
	case !ok:
		return nil, fmt.Errorf("bootstrap: certificate_providers[%q]: plugin %q is not registered: %w", instance, p.PluginName, ErrUnknownCertificateProvider)
	case errors.As(err, new(*fieldError)):
		return nil, fmt.Errorf("bootstrap: %w", err)
	case err != nil:
		return nil, fmt.Errorf("bootstrap: %w", fieldErrorf(path, "plugin %q: %v", p.PluginName, err))
	}
	return bc, nil
}
