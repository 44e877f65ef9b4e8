package client

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must leave no goroutine behind: Close stops them all.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
