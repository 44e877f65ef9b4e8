package grpcparity

import (
	"testing"

	"go.uber.org/goleak"
)

// Each case closes its channel and server: nothing of either may be left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
