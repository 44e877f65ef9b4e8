package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo runs to the end and each step shows what it says.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"1. the greeter's Listener arrived: serving",
		`2. SayHello over mTLS: "SayHello to ` + clientID + `"`,
		"3. SayBye: PermissionDenied",
		"4. a plaintext client: Unavailable",
		"5. the greeter's Listener deleted: not serving",
		`6. the Listener back: serving; SayHello: "SayHello to ` + clientID + `"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
