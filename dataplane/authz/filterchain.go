package authz

import (
	"net/netip"

	"github.com/goxds/xds/resources"
)

// FindFilterChain returns the filter chain of l for a connection from
// remote to local, as gRPC picks it (gRFC A36): among l's entries, those
// with the longest destination prefix that holds local; of these, those
// whose source type matches most specifically; then the longest source
// prefix that holds remote; then an exact source port over none. It
// returns the default filter chain when no entry is left, and nil when
// there is none (the connection is to be closed). IPv4-mapped IPv6
// addresses count as IPv4, as the Listener's prefixes do.
func FindFilterChain(l *resources.ServerListener, local, remote netip.AddrPort) *resources.FilterChain {
	la, ra := local.Addr().Unmap(), remote.Addr().Unmap()
	cands := l.Entries
	cands = best(cands, func(e *resources.FilterChainEntry) int { return prefixScore(e.Destination, la) })
	cands = best(cands, func(e *resources.FilterChainEntry) int {
		switch e.SourceType {
		case resources.SourceAny:
			return 0
		case resources.SourceSameIPOrLoopback:
			if ra.IsLoopback() || ra == la {
				return 1
			}
		case resources.SourceExternal:
			if !ra.IsLoopback() && ra != la {
				return 1
			}
		}
		return -1
	})
	cands = best(cands, func(e *resources.FilterChainEntry) int { return prefixScore(e.Source, ra) })
	cands = best(cands, func(e *resources.FilterChainEntry) int {
		switch e.SourcePort {
		case 0:
			return 0
		case uint32(remote.Port()):
			return 1
		}
		return -1
	})
	if len(cands) > 0 {
		// Validation made entries unique, so one is left.
		return cands[0].Chain
	}
	return l.DefaultFilterChain
}

// best keeps the entries with the highest non-negative score.
func best(in []resources.FilterChainEntry, score func(*resources.FilterChainEntry) int) []resources.FilterChainEntry {
	top := -1
	var out []resources.FilterChainEntry
	for i := range in {
		switch sc := score(&in[i]); {
		case sc < 0 || sc < top:
		case sc > top:
			top, out = sc, append(out[:0:0], in[i])
		default:
			out = append(out, in[i])
		}
	}
	return out
}

// prefixScore ranks how specifically p holds a: its length (the "any"
// zero Prefix scores 0, below a /0 which scores 1), -1 when it does not.
func prefixScore(p netip.Prefix, a netip.Addr) int {
	if !p.IsValid() {
		return 0
	}
	if !p.Contains(a) {
		return -1
	}
	return p.Bits() + 1
}
