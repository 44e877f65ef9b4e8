package xdscreds

import (
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/internal/upstreamtls"
	"github.com/goxds/xds/resources"
)

// HandshakeInfo is the security of the connections to one cluster's
// endpoints, made from the cluster's SecurityConfig and the bootstrap's
// certificate providers by NewHandshakeInfo. The balancer puts it on each
// SubConn address (SetHandshakeInfo) and the credentials of
// NewClientCredentials read it in the handshake. It is the neutral
// package internal/upstreamtls's, which httpxds's HTTP client uses too.
//
// A HandshakeInfo holds certificate providers (each may run a goroutine
// that watches files); Close releases them. It is safe for concurrent use.
type HandshakeInfo = upstreamtls.HandshakeInfo

// NewHandshakeInfo builds the certificate providers sc names from the
// bootstrap's certificate_providers: the root provider with the root
// certificate name, the identity provider (if any) with its own. An
// instance the bootstrap does not define is an error wrapping
// bootstrap.ErrUnknownCertificateProvider: the cluster cannot be reached
// securely, so it must not be reached at all.
func NewHandshakeInfo(b *bootstrap.Config, sc *resources.SecurityConfig) (*HandshakeInfo, error) {
	return upstreamtls.New(b, sc)
}

// Key returns a string equal for two SecurityConfigs exactly when one
// HandshakeInfo serves both, to share HandshakeInfos between clusters.
func Key(sc *resources.SecurityConfig) string { return upstreamtls.Key(sc) }

// addrInfo is what an address carries: the cluster's HandshakeInfo and the
// endpoint's hostname (for auto_host_sni).
type addrInfo struct {
	hi       *HandshakeInfo
	hostname string
}

type addrInfoKey struct{}

// SetHandshakeInfo returns addr with hi in its Attributes, and the
// endpoint's hostname (from EDS; "" if none), which becomes the SNI when
// the cluster asks for auto_host_sni. A nil hi means the cluster has no
// security config: the fallback credentials are used.
func SetHandshakeInfo(addr resolver.Address, hi *HandshakeInfo, hostname string) resolver.Address {
	if hi == nil {
		return addr
	}
	addr.Attributes = addr.Attributes.WithValue(addrInfoKey{}, addrInfo{hi: hi, hostname: hostname})
	return addr
}

// handshakeInfoFrom returns what SetHandshakeInfo put into a.
func handshakeInfoFrom(a *attributes.Attributes) (addrInfo, bool) {
	v, ok := a.Value(addrInfoKey{}).(addrInfo)
	return v, ok && v.hi != nil
}
