package grpcxds

import (
	"context"
	"math/bits"
	"math/rand/v2"
	"strings"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/resources"
)

// headerHash hashes an RPC by one header of its metadata (ring_hash's
// requestHashHeader, gRFC A76): its values joined with ",", or a random
// hash when the RPC does not carry it.
func headerHash(ctx context.Context, name string) uint64 {
	md, _ := metadata.FromOutgoingContext(ctx)
	if v, ok := header(md, name); ok {
		return xxhash.Sum64String(v)
	}
	return rand.Uint64()
}

// requestHash computes the hash of an RPC from the route's hash policies,
// in order: each policy that yields a hash is mixed in (the running hash
// rotated left by one bit, then XORed, so that equal policies do not
// cancel out), and a terminal policy that yields one ends the list. With
// no hash from any policy the RPC gets a random one, as in gRPC, so it
// lands anywhere on the ring.
func requestHash(policies []resources.HashPolicy, md metadata.MD, channelID uint64) uint64 {
	var h uint64
	hashed := false
	for _, hp := range policies {
		var ph uint64
		switch hp.Kind {
		case resources.HashPolicyHeader:
			v, ok := header(md, hp.HeaderName)
			if !ok {
				continue
			}
			if hp.RegexRewrite != nil {
				v = hp.RegexRewrite.ReplaceAllString(v, goTemplate(hp.RegexSubstitution))
			}
			ph = xxhash.Sum64String(v)
		case resources.HashPolicyChannelID:
			ph = channelID
		default: // source_ip: a client has no source IP to hash
			continue
		}
		h = bits.RotateLeft64(h, 1) ^ ph
		hashed = true
		if hp.Terminal {
			break
		}
	}
	if !hashed {
		return rand.Uint64()
	}
	return h
}

// goTemplate turns an RE2 substitution as Envoy takes it ("\1" for a
// capture group, "\\" for a backslash) into a Go regexp template ("${1}",
// with "$" escaped as "$$").
func goTemplate(sub string) string {
	if !strings.ContainsAny(sub, `\$`) {
		return sub
	}
	var b strings.Builder
	for i := 0; i < len(sub); i++ {
		c := sub[i]
		switch {
		case c == '$':
			b.WriteString("$$")
		case c == '\\' && i+1 < len(sub) && '0' <= sub[i+1] && sub[i+1] <= '9':
			j := i + 1
			for j < len(sub) && '0' <= sub[j] && sub[j] <= '9' {
				j++
			}
			b.WriteString("${" + sub[i+1:j] + "}")
			i = j - 1
		case c == '\\' && i+1 < len(sub):
			i++
			b.WriteByte(sub[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
