package treeerr

import (
	"errors"
	"testing"
)

// TestText: an error that names the listener is left as it is; any other
// gets the listener's name in front.
func TestText(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New(`resource "L1" does not exist`), `resource "L1" does not exist`},
		{errors.New("no virtual host matches the authority"), `listener "L1": no virtual host matches the authority`},
	} {
		if got := Text("L1", tc.err); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
