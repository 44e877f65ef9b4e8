package client

import "encoding/json"

// istiodDeltaWarning is logged once per server when a delta stream's
// responses say they come from istiod. istiod's delta server keeps, for
// the Cluster and Listener names a client subscribed to, only those of the
// client's latest subscribe request: once a client unsubscribes from one
// name, istiod stops pushing the other names it still watches. Its SotW
// server keeps the whole list, so SotW is what to use with it.
const istiodDeltaWarning = "istiod's delta xDS server is known to stop updating resources still watched after another is unsubscribed; use state of the world (api_type AGGREGATED_GRPC) with istiod"

// isIstiod tells whether a control_plane identifier is istiod's: istiod
// writes a JSON object whose Component is "istiod" (with the pod's name
// and its build beside it). Anything else, a plain string that mentions
// istiod included, is not.
func isIstiod(identifier string) bool {
	if len(identifier) == 0 || identifier[0] != '{' {
		return false
	}
	var id struct{ Component string }
	return json.Unmarshal([]byte(identifier), &id) == nil && id.Component == "istiod"
}
