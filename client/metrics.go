package client

import (
	"sort"
	"strings"
)

// Metrics receives the client's measurements, those of gRFC A78, so they
// can be fed to any metrics system. Methods are called from the client's
// goroutines, possibly concurrently, never under a client lock; they must
// not block. The number of resources per cache state, a gauge, is read with
// Client.ResourceCounts instead.
type Metrics interface {
	// ResourceUpdates counts the resources of one response of typeURL from
	// server: valid ones (applied, or unchanged) and invalid ones (rejected).
	ResourceUpdates(server, typeURL string, valid, invalid int)
	// ServerFailure counts a server going from healthy to unhealthy: a
	// stream that failed, or could not start, without a response (gRFC A57).
	ServerFailure(server string)
	// Connected reports whether the client has a working stream to server:
	// true once a stream has delivered a response, false after a failure.
	Connected(server string, connected bool)
}

// ResourceCount is one cell of Client.ResourceCounts.
type ResourceCount struct {
	// Authority is the xdstp authority of the resources, "#old" for names
	// that are not xdstp (gRFC A78's label value).
	Authority string
	TypeURL   string
	// CacheState is one of "requested", "does_not_exist", "acked", "nacked",
	// "nacked_but_cached" (rejected, with a good version still held), and
	// those of gRFC A88: "received_error", "received_error_but_cached" (the
	// server reported an error; a good version still held) and "timeout".
	CacheState string
	Count      int
}

// ResourceCounts counts the resources in the cache by authority, type and
// state, sorted: gRFC A78's resources gauge. A name watched with several
// sets of dynamic parameters counts once per set: each is a subscription
// with its own state.
func (c *Client) ResourceCounts() []ResourceCount {
	type key struct{ authority, typeURL, state string }
	counts := make(map[key]int)
	c.mu.Lock()
	for typeURL, tc := range c.caches {
		for _, e := range tc.entries {
			counts[key{authorityLabel(e.name), typeURL, cacheState(e)}]++
		}
	}
	c.unlock()
	out := make([]ResourceCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, ResourceCount{Authority: k.authority, TypeURL: k.typeURL, CacheState: k.state, Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Authority != b.Authority {
			return a.Authority < b.Authority
		}
		if a.TypeURL != b.TypeURL {
			return a.TypeURL < b.TypeURL
		}
		return a.CacheState < b.CacheState
	})
	return out
}

func cacheState(e *entry) string {
	switch e.status {
	case StatusDoesNotExist:
		if e.value != nil {
			return "does_not_exist_but_cached" // a deletion kept (gRFC A88)
		}
		return "does_not_exist"
	case StatusACKed:
		return "acked"
	case StatusNACKed:
		if e.value != nil {
			return "nacked_but_cached"
		}
		return "nacked"
	case StatusReceivedError:
		if e.value != nil {
			return "received_error_but_cached"
		}
		return "received_error"
	case StatusTimeout:
		return "timeout"
	}
	return "requested"
}

func authorityLabel(name string) string {
	if rest, ok := strings.CutPrefix(name, "xdstp://"); ok {
		authority, _, _ := strings.Cut(rest, "/")
		return authority
	}
	return "#old"
}

// noMetrics is the Metrics of a client given none.
type noMetrics struct{}

func (noMetrics) ResourceUpdates(string, string, int, int) {}
func (noMetrics) ServerFailure(string)                     {}
func (noMetrics) Connected(string, bool)                   {}
