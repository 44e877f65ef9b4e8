package extproc

import (
	"maps"
	"strings"

	"fmt"
	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// mutate applies a header answer's changes to a copy of h under the
// configured mutation rules; an invalid change, or a disallowed one when
// disallow_is_error, is an error.
func (c *Call) mutate(h map[string][]string, set []extauthz.HeaderOption, remove []string, field string) (map[string][]string, error) {
	rules := &c.p.cfg.MutationRules
	ms, err := extauthz.Mutations(rules, set, field+".set_headers")
	if err != nil {
		return nil, err
	}
	if rules.DisallowIsError {
		for _, o := range set {
			if !rules.Allowed(o.Key) {
				return nil, fmt.Errorf("%s.set_headers: header %q disallowed by mutation_rules", field, o.Key)
			}
		}
	}
	out := maps.Clone(h)
	if out == nil {
		out = map[string][]string{}
	}
	extauthz.Apply(out, ms)
	for i, k := range remove {
		if k == "" || strings.ToLower(k) != k {
			return nil, fmt.Errorf("%s.remove_headers[%d]: %q is not a valid header name", field, i, k)
		}
		if k == "host" || strings.HasPrefix(k, ":") {
			continue
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
