package grpcxds_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test closes its channels, clients, servers and backends; no
// goroutine may be left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
