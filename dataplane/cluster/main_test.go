package cluster

import (
	"testing"

	"go.uber.org/goleak"
)

// The Set's goroutines (waking idle clusters) end with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
