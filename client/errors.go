package client

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
)

// Errors given to watchers wrap one of these; match them with errors.Is.
var (
	// ErrResourceNotFound: the server does not have the resource. It never
	// arrived before the does-not-exist timer fired, the server deleted it,
	// or its TTL expired.
	ErrResourceNotFound = errors.New("resource does not exist")
	// ErrResourceInvalid: the server sent the resource, but it failed to
	// decode or validate, and was NACKed.
	ErrResourceInvalid = errors.New("resource rejected")
	// ErrServerUnavailable: the stream to the management server failed,
	// or (FILESYSTEM servers) a resource file cannot be read. The errors
	// that wrap it name the source as it is.
	ErrServerUnavailable = errors.New("management server unavailable")
	// ErrUnknownAuthority: an xdstp name names an authority the bootstrap
	// does not list.
	ErrUnknownAuthority = errors.New("authority not in bootstrap")
	// ErrInvalidName: a watched xdstp:// name is malformed; the error
	// says what is wrong with it. Nothing is asked of any server.
	ErrInvalidName = errors.New("invalid xdstp resource name")
	// ErrReportedByServer: the server reported an error for the resource
	// instead of sending it (DiscoveryResponse.resource_errors, gRFC A88).
	// The error is a *ServerReportedError with the server's code and
	// message; a NOT_FOUND one also matches ErrResourceNotFound.
	ErrReportedByServer = errors.New("error reported by the management server")
	// ErrClosed: the client was closed before the watch started. It is
	// the only event such a watch gets.
	ErrClosed = errors.New("xDS client closed")
)

// Error is what a watcher is told: which resource, and what went wrong.
// Use errors.As to read the resource; errors.Is to match the cause.
type Error struct {
	// TypeURL and Name identify the resource.
	TypeURL string
	Name    string
	// DynamicParameters are those of the watch (WatchOptions), nil for a
	// plain one. Callers must not modify them.
	DynamicParameters map[string]string
	// Err wraps one of the Err* sentinels, with detail.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	if len(e.DynamicParameters) > 0 {
		return fmt.Sprintf("%s %q %s: %v", shortTypeName(e.TypeURL), e.Name, formatParams(e.DynamicParameters), e.Err)
	}
	return fmt.Sprintf("%s %q: %v", shortTypeName(e.TypeURL), e.Name, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ServerReportedError is an error a server reported for one resource
// (resource_errors, gRFC A88). It matches ErrReportedByServer, and
// ErrResourceNotFound when Code is NotFound. Code is the server's, for
// logs and decisions; it is not meant to be handed on as the status of an
// RPC (gRFC A54 reserves NOT_FOUND to applications).
type ServerReportedError struct {
	// Source names the server ("management server", "resource files").
	Source string
	// Code and Message are the server's error_detail.
	Code    codes.Code
	Message string
}

// Error implements error.
func (e *ServerReportedError) Error() string {
	return fmt.Sprintf("%s reports %s: %s", e.Source, e.Code, e.Message)
}

// Is matches ErrReportedByServer, and ErrResourceNotFound for NOT_FOUND.
func (e *ServerReportedError) Is(target error) bool {
	return target == ErrReportedByServer || (target == ErrResourceNotFound && e.Code == codes.NotFound)
}

func shortTypeName(typeURL string) string {
	for i := len(typeURL) - 1; i >= 0; i-- {
		if typeURL[i] == '.' || typeURL[i] == '/' {
			return typeURL[i+1:]
		}
	}
	return typeURL
}
