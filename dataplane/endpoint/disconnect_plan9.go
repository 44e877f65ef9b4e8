package endpoint

import (
	"context"
	"errors"
	"os"
)

// DisconnectReason is the reason gRFC A94 gives a connection lost with
// err. Plan 9's errors are strings, not numbers: only a timeout is told
// apart; anything else is "unknown".
func DisconnectReason(err error) string {
	if err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)) {
		return DisconnectTimedOut
	}
	return DisconnectUnknown
}
