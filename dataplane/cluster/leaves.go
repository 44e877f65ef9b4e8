package cluster

import "github.com/goxds/xds/dataplane/lbpolicy"

// carried returns what cl's leaves hand the leaves of its next
// configuration (pick_first's choice, weighted_round_robin's weights),
// nil if nothing.
func (cl *Cluster) carried() *lbpolicy.Carried {
	var c *lbpolicy.Carried
	for _, p := range cl.prios {
		c = p.lb.Carry(c)
	}
	return c
}

// closeLeaves stops what the leaves of prios run (out-of-band load
// watches, weight updates, pick_first's turns): they are let go.
func closeLeaves(prios []*priority) {
	for _, p := range prios {
		p.lb.Close()
	}
}
