package grpcxds

import (
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/rls"
	"google.golang.org/grpc/serviceconfig"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/resources"
)

// RLS as a cluster specifier plugin (gRFC A28, and the xDS part of gRPC's
// RLS design): a route whose action names a RouteLookupClusterSpecifier
// plugin has the cluster of each RPC named by a route lookup service.
// goxds leaves the lookups, their cache, throttling, backoff and the
// default target to grpc-go's public RLS policy; this file turns the
// plugin's configuration into that policy's, and validates it with the
// policy's own parser, so that a route configuration is accepted or
// rejected as grpc-go's xDS client would.

// rlsPluginTypeURL is the plugin's configuration type, matched whole as
// gRPC matches it.
const rlsPluginTypeURL = "type.googleapis.com/grpc.lookup.v1.RouteLookupClusterSpecifier"

// rlsTargetPolicyName is the child policy the RLS policy runs for each
// target it is told of: one goxds cluster (rlschild.go). The RLS policy
// writes the target into its config field rlsTargetField.
const (
	rlsTargetPolicyName = "goxds_rls_target_experimental"
	rlsTargetField      = "cluster"
)

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

// rlsPluginConfig is a parsed RLS plugin: the RLS policy's configuration
// for the plugin's route_lookup_config, with goxds's target policy as its
// child.
type rlsPluginConfig struct {
	lb serviceconfig.LoadBalancingConfig
}

// parseRLSPlugin validates a RouteLookupClusterSpecifier: its
// route_lookup_config in JSON, with goxds's target policy as child policy,
// must satisfy the RLS policy's parser. The message's Go type is grpc-go's
// internal one; linking balancer/rls registers its descriptor, which is
// all decoding needs.
func parseRLSPlugin(a *anypb.Any) (resources.ClusterSpecifierConfig, error) {
	m, err := a.UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("RouteLookupClusterSpecifier: %v", err)
	}
	refl := m.ProtoReflect()
	fd := refl.Descriptor().Fields().ByName("route_lookup_config")
	if fd == nil { // not the message gRPC defines under this name
		return nil, errors.New("RouteLookupClusterSpecifier has no route_lookup_config field")
	}
	// An unset route_lookup_config is an empty one, which the parser
	// refuses (it has no lookup_service), as it does in gRPC.
	rlc, err := protojson.Marshal(refl.Get(fd).Message().Interface())
	if err != nil {
		return nil, fmt.Errorf("route_lookup_config: %v", err)
	}
	js, err := json.Marshal(struct {
		RouteLookupConfig                json.RawMessage              `json:"routeLookupConfig"`
		ChildPolicy                      []map[string]json.RawMessage `json:"childPolicy"`
		ChildPolicyConfigTargetFieldName string                       `json:"childPolicyConfigTargetFieldName"`
	}{rlc, []map[string]json.RawMessage{{rlsTargetPolicyName: json.RawMessage("{}")}}, rlsTargetField})
	if err != nil {
		return nil, err
	}
	parser, ok := balancer.Get(rls.Name).(balancer.ConfigParser)
	if !ok {
		return nil, fmt.Errorf("gRPC's %s policy is not registered", rls.Name)
	}
	lb, err := parser.ParseConfig(js)
	if err != nil {
		return nil, fmt.Errorf("route_lookup_config: %v", err)
	}
	return &rlsPluginConfig{lb: lb}, nil
}
