package watchers_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test closes its clients and servers; no goroutine may be left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
