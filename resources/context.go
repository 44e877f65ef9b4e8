package resources

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/goxds/xds/bootstrap"
)

// DecodeContext is what a decoder knows of where a resource came from: the
// management server that sent it, the bootstrap of the client decoding it,
// and the registry of filters and plugins that client validates with. Some
// rules need it: a Cluster's lrs_server "self" names the server that sent
// the Cluster, a certificate provider instance must be one the bootstrap
// defines (gRFC A29), and fields that affect security may be trusted only
// from a server marked trusted_xds_server (gRFC A81; a GrpcService, gRFC
// A102, whose target an untrusted server may only pick from the
// bootstrap's allowed_grpc_services).
//
// A client makes one per server and passes it to every decode of that
// server's responses; decoders must not modify it or what it points to.
// Every field may be nil, and a nil *DecodeContext is the same as the zero
// value: a resource decoded outside a client (a test, a tool) is validated
// with the default registry, and the rules that need a server or a
// bootstrap are left out, as the fields say.
type DecodeContext struct {
	// Server is the management server that sent the resource. For a
	// value read back from the last-known-good directory (client
	// Options.Persist) it is the server recorded with the value, as this
	// run's bootstrap describes the server of that URI. Nil: no server
	// known; a Cluster's lrs_server "self" then names none
	// (Cluster.LRSServer is nil).
	Server *bootstrap.ServerConfig
	// Bootstrap is the decoding client's bootstrap: its node, authorities,
	// certificate provider instances and allowed gRPC services. Nil: no
	// bootstrap known; the certificate provider instances that clusters
	// and server listeners name, and the targets of GrpcServices from
	// untrusted servers, are then not checked against one.
	Bootstrap *bootstrap.Config
	// Registry holds the HTTP filter and cluster specifier plugin types
	// listeners and route configurations are validated against. Nil: the
	// default registry (DefaultRegistry).
	Registry *Registry
}

// SourceDependent is implemented by decoded values that depend on the
// server that sent them (DecodeContext.Server), beyond their bytes. A
// client recognises bytes it holds already and does not decode them again;
// when the same bytes come from another server (a fallback, gRFC A71, or
// the return to the primary), it decodes them again only if the value it
// holds says it depends on its source, and then delivers the new value.
// Values that do not implement it, or say false, are kept as they are:
// the watchers hear nothing of the switch. Bytes that were rejected are
// always judged again by the new server's context.
//
// *Cluster implements it: with lrs_server "self" its LRSServer is the
// server that sent it. A user type whose decoder reads ctx.Server should
// implement it too.
type SourceDependent interface {
	// DependsOnSource reports whether the value would differ, had another
	// server sent the same bytes.
	DependsOnSource() bool
}

// DependsOnSource reports whether v is a SourceDependent that says it
// depends on its source.
func DependsOnSource(v Resource) bool {
	sd, ok := v.(SourceDependent)
	return ok && sd.DependsOnSource()
}

// registry returns the registry to validate with.
func (c *DecodeContext) registry() *Registry {
	if c == nil || c.Registry == nil {
		return defaultRegistry
	}
	return c.Registry
}

// endpointFallback tells whether the decoding client has gRFC A95 on
// (bootstrap.Config.EndpointFallback): off without a bootstrap.
func (c *DecodeContext) endpointFallback() bool {
	return c != nil && c.Bootstrap != nil && c.Bootstrap.EndpointFallback
}

// server returns the sending server, nil if none is known.
func (c *DecodeContext) server() *bootstrap.ServerConfig {
	if c == nil {
		return nil
	}
	return c.Server
}

// trusted reports whether the sending server is marked trusted_xds_server:
// fields that affect security (gRFC A81's auto_host_rewrite) are honoured
// only then. No server known is no trust.
func (c *DecodeContext) trusted() bool {
	s := c.server()
	return s != nil && s.TrustedXDSServer()
}

// checkCertificateProviders rejects a security configuration that names a
// certificate provider instance the bootstrap does not define (gRFC A29):
// such a cluster or filter chain could never make a handshake, and gRPC
// NACKs it rather than accept what will fail later. The identity instance
// is checked first, as gRPC does, and the message starts with gRPC's own
// words so that what is matched against grpc-go matches goxds too.
func (c *DecodeContext) checkCertificateProviders(sc *SecurityConfig) error {
	if c == nil || c.Bootstrap == nil || sc == nil {
		return nil
	}
	for _, p := range []struct{ kind, name string }{
		{"identity", sc.IdentityInstance},
		{"root", sc.RootInstance},
	} {
		if p.name == "" || c.Bootstrap.HasCertificateProvider(p.name) {
			continue
		}
		return fmt.Errorf("%s certificate provider instance name %q missing in bootstrap configuration (%s)",
			p.kind, p.name, definedProviders(c.Bootstrap))
	}
	return nil
}

// definedProviders says which instances the bootstrap does define, for
// the error of one it does not.
func definedProviders(b *bootstrap.Config) string {
	var names []string
	for _, n := range slices.Sorted(maps.Keys(b.CertificateProviders)) {
		if b.HasCertificateProvider(n) {
			names = append(names, fmt.Sprintf("%q", n))
		}
	}
	if len(names) == 0 {
		return "the bootstrap's certificate_providers defines none"
	}
	return "the bootstrap's certificate_providers defines " + strings.Join(names, ", ")
}
