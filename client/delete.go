package client

import (
	"fmt"
	"time"

	"github.com/goxds/xds/bootstrap"
)

// Deletions: what a server no longer sends, told apart by gRFC A88 into a
// data error that keeps the value, and a deletion.

// deleteAbsentLocked deletes what a SotW response of a whole-world type
// (Listener, Cluster) no longer lists. A name never received is left to its
// timer: the response may predate the request.
func (c *Client) deleteAbsentLocked(s *server, tc *typeCache, gen uint64, now time.Time) {
	for _, e := range tc.entries {
		if e.srv != s || e.seenGen == gen || e.rare().errGen == gen || !e.hasData() || e.rare().fromDisk {
			// A value from disk was not received in this run: like a
			// name never received, it is left to its timer.
			continue
		}
		c.serverDeletedLocked(s, tc, e, s.deletedReason(), now)
	}
}

// serverDeletedLocked applies the server's deletion of e: omitted from a
// SotW response of a whole-world type, or in a delta removed_resources.
//
// For Listeners and Clusters, gRFC A88 makes the deletion of a resource
// the client holds a data error, like a NACK: by default the value stays
// in force and watchers get an ambient error matching ErrResourceNotFound
// (status DOES_NOT_EXIST, the value still in Dump and CSDS); only a server
// marked fail_on_data_errors has the value dropped, and watchers a resource
// error. ignore_resource_deletion (gRFC A53), which A88 deprecates, changes
// nothing: its behaviour is now the default. A88 speaks of LDS and CDS
// alone, the types whose deletion gRPC's SotW clients see; a delta
// removal of another type (a RouteConfiguration, endpoints) still deletes,
// as the protocol says, and a name nothing was held for is simply found not
// to exist. Resource files (FILESYSTEM servers) are no control plane: a
// resource taken out of its file was taken out by whoever keeps the files,
// and is deleted.
func (c *Client) serverDeletedLocked(s *server, tc *typeCache, e *entry, reason string, now time.Time) {
	if e.value == nil || !tc.typ.AllResourcesRequiredInSotW() || s.cfg.FailOnDataErrors() || s.files() {
		c.deleteLocked(tc, e, reason, now)
		return
	}
	if e.status == StatusDoesNotExist {
		return // told already: SotW omits it from every later response too
	}
	e.stopDNETimer()
	cause := fmt.Errorf("%w: %s; keeping the last version (gRFC A88: the server is not marked %s)",
		ErrResourceNotFound, reason, bootstrap.FeatureFailOnDataErrors)
	err := &Error{TypeURL: tc.typ.TypeURL(), Name: e.name, DynamicParameters: e.rare().params, Err: cause}
	e.setStatus(StatusDoesNotExist, cause, err, now)
	c.logq.Warn("server deleted a resource; keeping it", "server", s.cfg.ServerURI,
		"type", tc.typ.TypeURL(), "name", e.logName(), "reason", reason)
	c.notifyLocked(tc, e, notifyAmbientError, nil, err, true)
}

// deleteLocked records that e does not exist and tells its watchers.
func (c *Client) deleteLocked(tc *typeCache, e *entry, reason string, now time.Time) {
	had := e.hasData()
	e.stopTimers()
	c.dropBytesLocked(tc, e)
	if e.value != nil || c.persistHasRecordLocked(tc, e) {
		// Also a name an earlier run held and this one never served.
		c.persistChangedLocked(tc, e)
	}
	e.value, e.version, e.rcvVersion = nil, "", ""
	e.setRawErr(nil)
	e.setConstraints(nil)
	e.setFromDisk(false)
	e.setStatus(StatusDoesNotExist, nil, nil, now)
	err := &Error{TypeURL: tc.typ.TypeURL(), Name: e.name, DynamicParameters: e.rare().params, Err: fmt.Errorf("%w: %s", ErrResourceNotFound, reason)}
	c.notifyLocked(tc, e, notifyResourceError, nil, err, had)
	if e.watchers.len() == 0 {
		c.forgetLocked(tc, e)
	}
}
