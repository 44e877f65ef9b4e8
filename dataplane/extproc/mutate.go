package extproc

import (
	"fmt"
	"maps"
	"slices"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// mutate applies a header answer's changes to a copy of h under the
// configured mutation rules. An invalid change (gRFC A102: a header name
// that is empty, not lower case, host, a pseudo-header or in the reserved
// grpc- space, or a value gRPC cannot carry) is an error, as is a
// disallowed one when disallow_is_error; the caller fails the stream.
func (c *Call) mutate(h map[string][]string, set []extauthz.HeaderOption, remove []string, field string) (map[string][]string, error) {
	rules := &c.p.cfg.MutationRules
	set = slices.Clone(set)
	for i, o := range set {
		if err := extauthz.ValidHeader(o.Key, o.Value); err != nil {
			return nil, fmt.Errorf("%s.set_headers[%d]: %v", field, i, err)
		}
		if rules.DisallowIsError && !rules.Allowed(o.Key) {
			return nil, fmt.Errorf("%s.set_headers[%d]: header %q disallowed by mutation_rules", field, i, o.Key)
		}
		// gRFC A102: keep_empty_value is not read; an empty value is set
		// as it is, never a removal.
		set[i].KeepEmptyValue = true
	}
	ms, err := extauthz.Mutations(rules, set, field+".set_headers")
	if err != nil {
		return nil, err
	}
	out := maps.Clone(h)
	if out == nil {
		out = map[string][]string{}
	}
	extauthz.Apply(out, ms)
	for i, k := range remove {
		if err := extauthz.ValidHeader(k, ""); err != nil {
			return nil, fmt.Errorf("%s.remove_headers[%d]: %v", field, i, err)
		}
		if !rules.Allowed(k) {
			if rules.DisallowIsError {
				return nil, fmt.Errorf("%s.remove_headers[%d]: header %q disallowed by mutation_rules", field, i, k)
			}
			continue
		}
		delete(out, k)
	}
	return out, nil
}

// forwarded is the part of h forward_rules let the processor see.
func (c *Call) forwarded(h map[string][]string) map[string][]string {
	cfg := c.p.cfg
	out := make(map[string][]string, len(h))
	for k, v := range h {
		if matchAny(cfg.DisallowedHeaders, k) || (cfg.AllowedHeaders != nil && !matchAny(cfg.AllowedHeaders, k)) {
			continue
		}
		out[k] = v
	}
	return out
}

func matchAny(ms []resources.StringMatcher, s string) bool {
	for i := range ms {
		if ms[i].Match(s) {
			return true
		}
	}
	return false
}
