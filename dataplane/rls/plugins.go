package rls

import (
	"errors"
	"maps"
	"sync"

	"github.com/goxds/xds/resources"
)

// Plugins runs a Policy for each RLS plugin that the routes of the
// virtual host in force use, all with one set of Options: a channel's
// route lookups. Its methods are safe for concurrent use; they call the
// Policies' Update and Close, which call the Host, so the caller must
// hold none of the locks the Host takes.
type Plugins struct {
	opts Options

	mu     sync.Mutex
	closed bool
	// vh and rc are what Update last saw.
	vh *resources.VirtualHost
	rc *resources.RouteConfig
	// running are the policies, by plugin name, each with the config it
	// was last given.
	running map[string]*plugin
}

// plugin is one running Policy.
type plugin struct {
	cfg *Config
	pol *Policy
}

// NewPlugins returns Plugins whose Policies are made with opts.
func NewPlugins(opts Options) *Plugins { return &Plugins{opts: opts} }

// Update starts, updates and stops Policies for the RLS plugins (those
// whose config is a *Config) that the routes of vh use, rc being the
// route configuration that has their configs; nil for none. When the set
// of Policies changed, it returns them by plugin name (a new map, the
// caller's) and changed true. A virtual host and
// route configuration the same as the last, the usual update, cost a look
// at two pointers; a configuration without plugins looks at no route.
// The error is of the dials that failed (Policy.Update); their Policies
// run, and fail their lookups with it.
func (ps *Plugins) Update(vh *resources.VirtualHost, rc *resources.RouteConfig) (policies map[string]*Policy, changed bool, err error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed || (vh == ps.vh && rc == ps.rc) {
		return nil, false, nil
	}
	ps.vh, ps.rc = vh, rc
	var want map[string]*Config
	if vh != nil && rc != nil && len(rc.ClusterSpecifierPlugins) > 0 {
		want = make(map[string]*Config)
		for _, r := range vh.Routes {
			if cfg, ok := rc.ClusterSpecifierPlugins[r.ClusterSpecifierPlugin].(*Config); ok {
				want[r.ClusterSpecifierPlugin] = cfg
			}
		}
	}
	if len(want) == 0 && len(ps.running) == 0 {
		return nil, false, nil
	}
	var errs []error
	for name, p := range ps.running {
		if want[name] == nil {
			delete(ps.running, name)
			p.pol.Close()
			changed = true
		}
	}
	for name, cfg := range want {
		p := ps.running[name]
		if p == nil {
			if ps.running == nil {
				ps.running = make(map[string]*plugin)
			}
			p = &plugin{pol: New(ps.opts)}
			ps.running[name] = p
			changed = true
		}
		if p.cfg != cfg {
			p.cfg = cfg
			if err := p.pol.Update(cfg); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if changed {
		policies = make(map[string]*Policy, len(ps.running))
		for name, p := range ps.running {
			policies[name] = p.pol
		}
	}
	return policies, changed, errors.Join(errs...)
}

// Close stops every Policy; Update does nothing after.
func (ps *Plugins) Close() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.closed = true
	for p := range maps.Values(ps.running) {
		p.pol.Close()
	}
	ps.running, ps.vh, ps.rc = nil, nil, nil
}
