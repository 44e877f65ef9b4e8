package client

import (
	"encoding/json"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// istiodDeltaWarning is logged once per server when a delta stream's
// server looks like istiod. istiod's delta server keeps, for the Cluster
// and Listener names a client subscribed to, only those of the client's
// latest subscribe request: once a client unsubscribes from one name,
// istiod stops pushing the other names it still watches. Its SotW server
// keeps the whole list, so SotW is what to use with it.
const istiodDeltaWarning = "istiod's delta xDS server is known to stop updating resources still watched after another is unsubscribed; use state of the world (api_type AGGREGATED_GRPC) with istiod"

// istiodSign tells why a delta server looks like istiod, "" if it does
// not. There is no one sign: istiod names itself in control_plane only
// up to early 2025 (istio/istio#54640 then kept it for its debug types),
// so the server's address and the bootstrap, which istio-agent writes,
// count too.
//
//   - "control_plane": the identifier of a response is istiod's, a JSON
//     object whose Component is "istiod" (with the pod and its build).
//   - "server_uri": the server's host is istiod's Service, whose first
//     label is "istiod" or, for a revision, starts with "istiod-"
//     ("istiod.istio-system.svc:15012", "dns:///istiod-canary.istio-system:15012").
//   - "node metadata ISTIO_VERSION": istio-agent wrote the bootstrap, and
//     the server is the agent's proxy to istiod.
func istiodSign(controlPlane, serverURI string, node *corev3.Node) string {
	if isIstiodIdentifier(controlPlane) {
		return "control_plane"
	}
	if isIstiodHost(serverURI) {
		return "server_uri"
	}
	if _, ok := node.GetMetadata().GetFields()["ISTIO_VERSION"]; ok {
		return "node metadata ISTIO_VERSION"
	}
	return ""
}

// isIstiodIdentifier tells whether a control_plane identifier is istiod's.
// Anything but istiod's JSON, a plain string that mentions istiod
// included, is not.
func isIstiodIdentifier(identifier string) bool {
	if !strings.HasPrefix(identifier, "{") {
		return false
	}
	var id struct{ Component string }
	return json.Unmarshal([]byte(identifier), &id) == nil && id.Component == "istiod"
}

// isIstiodHost tells whether a gRPC target names istiod's Service: its
// endpoint (the target itself, or what follows scheme://authority/) is a
// host whose first label is istiod's.
func isIstiodHost(target string) bool {
	host := target
	if _, rest, ok := strings.Cut(target, "://"); ok {
		_, host, _ = strings.Cut(rest, "/")
	}
	label, _, _ := strings.Cut(host, ".")
	label, _, _ = strings.Cut(label, ":")
	return label == "istiod" || strings.HasPrefix(label, "istiod-")
}
