package route

import "testing"

// gRPC's header view (gRFC A28): repeated values joined, binary headers
// unseen, content-type application/grpc; Last reads the last value.
func TestGRPCHeaders(t *testing.T) {
	h := GRPCHeaders{"x-a": {"1", "2"}, "x-one": {"v"}, "x-key-bin": {"b"}, "content-type": {"application/grpc+proto"}}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"x-a", "1,2", true},
		{"x-one", "v", true},
		{"x-key-bin", "", false},
		{"content-type", "application/grpc", true},
		{"x-absent", "", false},
	} {
		if got, ok := h.Get(tc.name); got != tc.want || ok != tc.ok {
			t.Errorf("Get(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if got, ok := h.Last("x-a"); got != "2" || !ok {
		t.Errorf("Last(x-a) = %q, %v; want 2", got, ok)
	}
	if _, ok := h.Last("x-absent"); ok {
		t.Error("Last of an absent header found it")
	}
	if got, ok := GRPCHeaders(nil).Get("content-type"); got != "application/grpc" || !ok {
		t.Errorf("no metadata: content-type %q, %v; want application/grpc", got, ok)
	}
}
