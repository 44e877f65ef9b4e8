// Package treeerr words the error of a listener's config tree for the
// adapters' errors that carry it (grpcxds.ConfigError, httpxds.HostError):
// one rule, so that a gRPC channel's RPCs and an HTTP client's requests
// tell the same cause alike.
package treeerr

import (
	"fmt"
	"strings"
)

// Text is err's text naming listener: the client's own errors already
// name the resource, and are left as they are; the others (a virtual host
// that does not match, say) get the listener's name in front.
func Text(listener string, err error) string {
	msg := err.Error()
	if !strings.Contains(msg, listener) {
		msg = fmt.Sprintf("listener %q: %s", listener, msg)
	}
	return msg
}
