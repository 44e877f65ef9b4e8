//go:build !plan9

package endpoint

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// DisconnectReason is the reason gRFC A94 gives a connection lost with
// err (a read or write error of its socket): the socket errors it names,
// "socket error" for another of the system's, "unknown" for anything else
// (nil, or io.EOF: the peer closed the connection).
func DisconnectReason(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return DisconnectUnknown
	case errors.Is(err, syscall.ECONNRESET):
		return DisconnectReset
	case errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, context.DeadlineExceeded):
		return DisconnectTimedOut
	case errors.Is(err, syscall.ECONNABORTED):
		return DisconnectAborted
	case errors.As(err, &errno):
		return DisconnectSocket
	}
	return DisconnectUnknown
}
