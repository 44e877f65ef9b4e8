package transport_test

import (
	"slices"
	"testing"

	"github.com/goxds/xds/bootstrap"
)

// A name polled for again after polling stopped (nothing was wanted) is
// reported sent again once the poll naming it is written: the client forgot
// it meanwhile, and starts its does-not-exist timer on the report.
func TestRESTNamesReportedAgainAfterPollingStopped(t *testing.T) {
	e := newRESTEnv(t, bootstrap.ServerConfig{}, fastOptions)
	e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
	held := e.next()
	if s := nextSent(t, e.h); !slices.Equal(s.names, []string{"C1"}) {
		t.Fatalf("OnSubscriptionsSent(%v), want C1", s.names)
	}
	e.tr.UpdateSubscriptions(cdsURL, nil, []string{"C1"})
	<-held.gone
	e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
	e.next()
	if s := nextSent(t, e.h); !slices.Equal(s.names, []string{"C1"}) {
		t.Fatalf("OnSubscriptionsSent(%v), want C1 again", s.names)
	}
}
