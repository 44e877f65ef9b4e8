package resources

import (
	"strconv"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// PathNormalization is how an HttpConnectionManager asks a server to
// normalize request paths before routing and HTTP filters (RBAC) see them:
// its normalize_path, merge_slashes and path_with_escaped_slashes_action
// fields, as received. gRPC's server does not use them (gRPC paths are
// "/service/method"); an HTTP server (package httpxds) does, and resolves
// what is unset with its own defaults (package dataplane/httppath).
type PathNormalization struct {
	// NormalizePath is normalize_path; nil when the field is unset.
	NormalizePath *bool
	// MergeSlashes is merge_slashes (a plain bool: unset reads false).
	MergeSlashes bool
	// EscapedSlashes is path_with_escaped_slashes_action.
	EscapedSlashes EscapedSlashesAction
}

// EscapedSlashesAction is an HttpConnectionManager's
// path_with_escaped_slashes_action: what to do with a path holding %2F or
// %5C (in either case).
type EscapedSlashesAction int

// The values of path_with_escaped_slashes_action, in the proto's order.
const (
	// EscapedSlashesDefault is IMPLEMENTATION_SPECIFIC_DEFAULT (unset).
	EscapedSlashesDefault EscapedSlashesAction = iota
	// EscapedSlashesKeep is KEEP_UNCHANGED: the sequences stay as they are.
	EscapedSlashesKeep
	// EscapedSlashesReject is REJECT_REQUEST: the request is refused.
	EscapedSlashesReject
	// EscapedSlashesUnescapeAndRedirect is UNESCAPE_AND_REDIRECT: the
	// client is redirected to the path with the sequences unescaped.
	EscapedSlashesUnescapeAndRedirect
	// EscapedSlashesUnescapeAndForward is UNESCAPE_AND_FORWARD: the path
	// is unescaped and the request goes on.
	EscapedSlashesUnescapeAndForward
)

// String returns the proto's name of the action.
func (a EscapedSlashesAction) String() string {
	if n, ok := hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction_name[int32(a)]; ok {
		return n
	}
	return "EscapedSlashesAction(" + strconv.Itoa(int(a)) + ")"
}

// pathNormalization reads hcm's path fields. A value of
// path_with_escaped_slashes_action the proto does not define is refused,
// as Envoy's validation (defined_only) refuses it: the server could not
// know what it asks for, and guessing could let a path past RBAC.
func pathNormalization(hcm *hcmv3.HttpConnectionManager) (PathNormalization, error) {
	p := PathNormalization{MergeSlashes: hcm.GetMergeSlashes()}
	if np := hcm.GetNormalizePath(); np != nil {
		v := np.GetValue()
		p.NormalizePath = &v
	}
	a := hcm.GetPathWithEscapedSlashesAction()
	if _, ok := hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction_name[int32(a)]; !ok {
		return PathNormalization{}, fieldErrorf("path_with_escaped_slashes_action", "unknown value %d", int32(a))
	}
	p.EscapedSlashes = EscapedSlashesAction(a)
	return p, nil
}

// HostPortStrip is an HttpConnectionManager's strip_matching_host_port or
// strip_any_host_port: whether a server drops the port of the Host header
// before routing and HTTP filters see it (and the handler then), so that
// "example:8080" matches a virtual host of "example". gRPC's server does
// not use it; an HTTP server (package httpxds) does.
type HostPortStrip int

// The values of HostPortStrip.
const (
	// HostPortKeep: neither field is set; the port stays part of the host.
	HostPortKeep HostPortStrip = iota
	// HostPortStripMatching is strip_matching_host_port: the port is
	// dropped when it is the listener's port.
	HostPortStripMatching
	// HostPortStripAny is strip_any_host_port: any port is dropped.
	HostPortStripAny
)

// String returns the field's name, "keep" for neither.
func (s HostPortStrip) String() string {
	switch s {
	case HostPortKeep:
		return "keep"
	case HostPortStripMatching:
		return "strip_matching_host_port"
	case HostPortStripAny:
		return "strip_any_host_port"
	}
	return "HostPortStrip(" + strconv.Itoa(int(s)) + ")"
}

// hostPortStrip reads hcm's port stripping. Both fields set is refused, as
// Envoy refuses it (the proto: only one of them can be set).
func hostPortStrip(hcm *hcmv3.HttpConnectionManager) (HostPortStrip, error) {
	switch m, a := hcm.GetStripMatchingHostPort(), hcm.GetStripAnyHostPort(); {
	case m && a:
		return HostPortKeep, fieldErrorf("strip_any_host_port", "must not be set with strip_matching_host_port (only one of them can be)")
	case m:
		return HostPortStripMatching, nil
	case a:
		return HostPortStripAny, nil
	}
	return HostPortKeep, nil
}
