package client

import (
	"github.com/goxds/xds/bootstrap"
)

// What watchers and logs are told of a server is worded for what it is: a
// management server, or, for a FILESYSTEM "server", files. Someone who
// configured files and is told a management server is unavailable looks for
// a server that does not exist.

// files tells whether s is a FILESYSTEM server.
func (s *server) files() bool { return s.cfg.APIType == bootstrap.APITypeFilesystem }

// sourceName names s in messages.
func (s *server) sourceName() string {
	if s.files() {
		return "resource files"
	}
	return "management server"
}

// unavailableError reports that a server cannot be reached, or its files
// read. It matches ErrServerUnavailable and its cause with errors.Is, but
// its text names the source as it is.
type unavailableError struct {
	source string
	cause  error
}

func (e *unavailableError) Error() string {
	return e.source + " unavailable: " + e.cause.Error()
}

func (e *unavailableError) Unwrap() []error { return []error{ErrServerUnavailable, e.cause} }

// unavailable wraps cause, the failure of s, as ErrServerUnavailable.
func (s *server) unavailable(cause error) error {
	return &unavailableError{source: s.sourceName(), cause: cause}
}

// deletedReason says why a resource s no longer lists is deleted.
func (s *server) deletedReason() string {
	if s.files() {
		return "no longer in its resource file"
	}
	return "deleted by the management server"
}
