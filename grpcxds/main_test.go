package grpcxds_test

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"
)

// Every test closes its channels, clients, servers and backends; no
// goroutine may be left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quietLogger is the tests' client logger. Tests lose servers and get
// rejected resources on purpose; the default logger would print the
// warnings.
var quietLogger = slog.New(slog.DiscardHandler)
