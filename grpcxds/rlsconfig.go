package grpcxds

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/dataplane/rls"
	"github.com/goxds/xds/internal/rlsgrpc"
	"github.com/goxds/xds/resources"
)

// RLS as a cluster specifier plugin (gRFC A28, and the xDS part of gRPC's
// RLS design): package dataplane/rls parses and validates the plugin's
// configuration as gRPC does; this file registers it, and adds the check
// only grpc-go can make, that the lookup service's target has a resolver.

// rlsPluginTypeURL is the plugin's configuration type, matched whole as
// gRPC matches it.
const rlsPluginTypeURL = "type.googleapis.com/grpc.lookup.v1.RouteLookupClusterSpecifier"

// rlsSpecifier is the RLS plugin as a registry holds it.
var rlsSpecifier = resources.ClusterSpecifierType{
	Name:        "rls",
	TypeURLs:    []string{rlsPluginTypeURL},
	ParseConfig: parseRLSPlugin,
}

// RegisterRLS adds the RLS cluster specifier plugin
// (grpc.lookup.v1.RouteLookupClusterSpecifier) to reg, for a client made
// outside the Builder and given to it as Options.Client: make reg with
// resources.DefaultRegistry().Clone(), call RegisterRLS, and pass it as
// client.Options.Registry. A Builder that makes its own client adds the
// plugin itself. Importing the package registers it nowhere, so that it
// never changes how other clients of the process validate routes: a
// client whose registry lacks it skips the routes of an optional RLS
// plugin and NACKs a route configuration with a required one, as it does
// for any plugin it does not know. RegisterRLS fails if reg is nil or
// already has a plugin for that type URL.
func RegisterRLS(reg *resources.Registry) error {
	if reg == nil {
		return errors.New("grpcxds: RegisterRLS: nil registry")
	}
	if err := reg.RegisterClusterSpecifier(rlsSpecifier); err != nil {
		return fmt.Errorf("grpcxds: RegisterRLS: %w", err)
	}
	return nil
}

// withRLS returns a copy of reg (nil: the default registry) that has the
// RLS plugin: the registry of a client the Builder makes. A plugin the
// caller registered for the type URL is kept (RegisterRLS's, or their own).
func withRLS(reg *resources.Registry) *resources.Registry {
	if reg == nil {
		reg = resources.DefaultRegistry()
	}
	reg = reg.Clone()
	if _, ok := reg.LookupClusterSpecifier(rlsPluginTypeURL); !ok {
		// Cannot fail: the copy is ours and has no plugin for the URL.
		_ = reg.RegisterClusterSpecifier(rlsSpecifier)
	}
	return reg
}

// parseRLSPlugin validates a RouteLookupClusterSpecifier: its config is a
// *rls.Config.
func parseRLSPlugin(a *anypb.Any) (resources.ClusterSpecifierConfig, error) {
	cfg, err := rls.ParseClusterSpecifier(a.GetValue())
	if err != nil {
		return nil, err
	}
	if err := rlsgrpc.CheckTarget(cfg.LookupService); err != nil {
		return nil, fmt.Errorf("route_lookup_config: %w", err)
	}
	return cfg, nil
}
