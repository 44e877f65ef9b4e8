package grpcxds

import (
	"fmt"
	"log/slog"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/internal/upstreamtls"
	"github.com/goxds/xds/watchers"
)

// Cluster TLS (gRFC A29). A cluster's SecurityConfig becomes an
// xdscreds.HandshakeInfo, with the certificate providers it names built
// from the bootstrap, and the HandshakeInfo rides on the addresses of the
// cluster's SubConns for the channel's xdscreds credentials to use. An
// endpoint's SubConn is per address list and security: two clusters that
// list one address with different TLS get two connections.
//
// Only a channel whose credentials are xdscreds' honours clusters' TLS.
// Any other channel uses its own credentials for every cluster, as grpc-go
// does; a cluster that asks for TLS on such a channel is logged at warning
// level, once per cluster.

// tlsState is the balancer's part of clusters' TLS. bootstrap defines
// the certificate providers (nil: none); security holds the
// HandshakeInfos in use, shared by the endpoints of every cluster with
// the same security; warnedPlain the clusters whose TLS a channel without
// xdscreds was warned of. Guarded by xdsBalancer.mu.
type tlsState struct {
	bootstrap   *bootstrap.Config
	security    upstreamtls.Cache
	warnedPlain map[string]bool
}

// Security implements cluster.Host: the security of a leaf's
// connections, nil for the channel's credentials, or the
// *upstreamtls.Shared of its TLS, which each endpoint holds (connTag). An
// error means the cluster's TLS cannot be honoured (a certificate
// provider instance the bootstrap does not define): the leaf gets no
// endpoints, so that its RPCs fail rather than go out unprotected.
func (b *xdsBalancer) Security(leaf *watchers.ClusterConfig) (any, error) {
	sc := leaf.Cluster.Security
	if sc == nil {
		return nil, nil
	}
	if !b.xdsCreds {
		if !b.tls.warnedPlain[leaf.Name] {
			b.tls.warnedPlain[leaf.Name] = true
			b.logLocked(slog.LevelWarn, "the cluster asks for TLS, but the channel's credentials are not xdscreds: the channel's own are used",
				"cluster", leaf.Name)
		}
		return nil, nil
	}
	sec, err := b.tls.security.Get(b.tls.bootstrap, sc)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: TLS cannot be set up: %w", leaf.Name, err)
	}
	return sec, nil
}

// setBootstrapLocked takes the bootstrap of a resolver state. HandshakeInfos
// built from another bootstrap are kept until their endpoints go: the
// resolver's bootstrap does not change while the channel lives.
func (b *xdsBalancer) setBootstrapLocked(cfg *bootstrap.Config) {
	if cfg != nil {
		b.tls.bootstrap = cfg
	}
}
