package client

import (
	"bytes"
	"sort"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// ResourceStatus is what the client knows of one resource, for status
// dumps (see Client.Dump).
type ResourceStatus struct {
	TypeURL string
	Name    string
	// DynamicParameters are those of the subscription (WatchOptions), nil
	// for a plain one: a name watched with several parameter sets has one
	// ResourceStatus for each.
	DynamicParameters map[string]string
	// Server is the server_uri of the server the data held came from, or,
	// with none, of the server it is requested from. With fallback (gRFC
	// A71) it may be a fallback server.
	Server string
	Status Status
	// Version is the version of the value held ("" if none).
	Version string
	// Value is the serialized value held, nil if none.
	Value *anypb.Any
	// Err is why the last version received was rejected (StatusNACKed),
	// the error the server reported (StatusReceivedError, a
	// *ServerReportedError), or the timeout (StatusTimeout). For
	// StatusRequested it is why the resource has not come: the transport
	// cannot fetch it (a resource file missing, no service for the type),
	// or the server it is requested from is unreachable (an error that
	// matches ErrServerUnavailable, until the server answers again).
	Err error
	// ControlPlane is the identifier the server named in Server last gave
	// in a response (control_plane), "" if none.
	ControlPlane string
	// Rejected is the serialized rejected version, when it was readable,
	// and RejectedVersion its version.
	Rejected        *anypb.Any
	RejectedVersion string
	// LastUpdated is when the status last changed.
	LastUpdated time.Time
	// Watchers counts the named watchers of the resource.
	Watchers int
	// FromDisk: Value was read from the persistence directory
	// (Options.Persist) and no server has sent the resource since the
	// client started. Status is then StatusRequested.
	FromDisk bool
}

// Node returns the node the client identifies itself with.
func (c *Client) Node() *corev3.Node { return proto.Clone(c.node).(*corev3.Node) }

// Dump reports every resource in the cache, sorted by type URL, name and
// NameWithParameters.
func (c *Client) Dump() []ResourceStatus {
	c.mu.Lock()
	defer c.unlock()
	var out []ResourceStatus
	for typeURL, tc := range c.caches {
		for _, e := range tc.entries {
			from := e.srv
			if e.src != nil && e.hasData() {
				from = e.src
			}
			st := ResourceStatus{
				TypeURL: typeURL,
				Name:    e.name,
				// Shared, not copied: entries never modify params.
				DynamicParameters: e.rare().params,
				Server:            from.cfg.ServerURI,
				Status:            e.status,
				Version:           e.version,
				Err:               c.dumpErrLocked(e),
				LastUpdated:       e.lastUpdated,
				Watchers:          e.watchers.len(),
				// ControlPlane: the server's latest; a held value from an
				// earlier instance is still that server's data.
				ControlPlane: from.controlPlane,
				FromDisk:     e.rare().fromDisk,
			}
			if e.value != nil {
				// A copy: the caller owns what Dump returns.
				st.Value = &anypb.Any{TypeUrl: typeURL, Value: bytes.Clone(e.valueRaw)}
			}
			if e.status == StatusNACKed {
				st.RejectedVersion = e.rcvVersion
			}
			if raw := e.raw(); e.rare().rawErr != nil && len(raw) > 0 && !bytes.Equal(raw, e.valueRaw) {
				st.Rejected = &anypb.Any{TypeUrl: typeURL, Value: bytes.Clone(raw)}
			}
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TypeURL != out[j].TypeURL {
			return out[i].TypeURL < out[j].TypeURL
		}
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].NameWithParameters() < out[j].NameWithParameters()
	})
	return out
}

// dumpErrLocked is the error Dump shows for e: the one of its status, or,
// for a resource still waited for from a server that is down, why the
// server cannot be reached. Without it a dump shows REQUESTED and nothing
// wrong, while every watcher of the resource is told the server is
// unavailable.
func (c *Client) dumpErrLocked(e *entry) error {
	if err := e.rare().lastErr; err != nil || e.status != StatusRequested {
		return err
	}
	if s := e.srv; s.unreachable != nil {
		return s.unavailable(s.unreachable)
	}
	return nil
}

// NameWithParameters is Name, followed by the dynamic parameters when the
// subscription has some: name{k1="v1", k2="v2"}, keys sorted, values
// quoted as Go strings. Status dumps that have only a name field (CSDS)
// show this.
func (st ResourceStatus) NameWithParameters() string {
	if len(st.DynamicParameters) == 0 {
		return st.Name
	}
	return st.Name + formatParams(st.DynamicParameters)
}
