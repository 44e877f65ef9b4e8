package cluster

import (
	"github.com/goxds/xds/dataplane/outlier"
)

// Outlier detection (gRFC A50) is package dataplane/outlier's: each
// priority of a leaf cluster with outlier_detection has a detector, which
// is the priority's lbpolicy.Ejector (an ejected endpoint is failing to
// the cluster's policy and to the priority's state, as gRPC's child
// policies see the subchannels its outlier detection reports failing),
// and to which priorityPicker's Done reports each request's outcome: any
// error is a failure, as in gRPC. Here is only its place in a cluster.

// odKey names a detector within a cluster: the leaf and the index of the
// priority among the leaf's.
type odKey struct {
	leaf string
	prio int
}

// attachOutliersLocked gives each priority of cl whose leaf has outlier
// detection its detector, keeping those of the priorities it had, with
// their counts and ejections, and stops the others. Detectors run on the
// Set's clock, and report the outliers they find to Config.OutlierMetrics
// as outliers of their leaf (gRFC A89's backend service is the leaf
// cluster, under an aggregate too).
func (s *Set) attachOutliersLocked(cl *Cluster) {
	old := cl.outliers
	cl.outliers = nil
	var leaf string
	n := 0
	for _, p := range cl.prios {
		if p.leaf != leaf {
			leaf, n = p.leaf, 0
		}
		key := odKey{leaf, n}
		n++
		if p.outlier == nil {
			continue
		}
		d := old[key]
		delete(old, key)
		if d == nil {
			d = outlier.New(s.clock, s.outlierIntervalLocked(cl), s.cfg.OutlierMetrics, p.leaf)
		}
		d.Update(*p.outlier, p.lb.Localities)
		if cl.outliers == nil {
			cl.outliers = make(map[odKey]*outlier.Detector)
		}
		cl.outliers[key] = d
		p.lb.Ejected = d
	}
	for _, d := range old {
		d.Stop()
	}
}

// outlierIntervalLocked returns how cl's detectors end an interval: under
// the owner's lock (Host.Do), rebuilding cl's picker when an ejection
// changed.
func (s *Set) outlierIntervalLocked(cl *Cluster) func(f func() bool) {
	return func(f func() bool) {
		s.host.Do(func() {
			if s.closed {
				return
			}
			if f() {
				s.dirty[cl] = struct{}{}
			}
		})
	}
}

// stopOutliers stops the timers of cl's detectors.
func (cl *Cluster) stopOutliers() {
	for _, d := range cl.outliers {
		d.Stop()
	}
}
