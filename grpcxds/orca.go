package grpcxds

import (
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc/orca"

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/lbpolicy"
)

// The binding of weighted_round_robin's weights (package lbpolicy, gRFC
// A58) to gRPC's ORCA load reports: per request, the report a response's
// trailer carries (DoneInfo.ServerLoad, parsed by grpc-go's orca package,
// which registers its parser when linked: without this file's import
// DoneInfo.ServerLoad would be nil, and load reports, LRS's included,
// would carry no metrics) goes to the cluster layer's Done; out of band,
// grpc-go's public ORCA producer on the endpoint's SubConn feeds the
// weight here.

// A subConn carries out-of-band reports: the leaves look for the method.
var _ lbpolicy.LoadWatcher = (*subConn)(nil)

// WatchLoad makes a SubConn an lbpolicy.LoadWatcher: out-of-band reports
// from it, asked for every period, for weighted_round_robin's
// enable_oob_load_report. grpc-go runs one stream per SubConn whatever the
// number of listeners, at the shortest period asked.
func (s *subConn) WatchLoad(period time.Duration, w *lbpolicy.EndpointWeight) (stop func()) {
	return orca.RegisterOOBListener(s.SubConn, oobListener{w}, orca.OOBListenerOptions{ReportInterval: period})
}

// oobListener hands each out-of-band report to an endpoint's weight. It
// runs on grpc-go's ORCA stream goroutine and takes only the weight's
// lock.
type oobListener struct{ w *lbpolicy.EndpointWeight }

func (l oobListener) OnLoadReport(r *v3orcapb.OrcaLoadReport) { l.w.Report(cluster.ORCALoad(r)) }
