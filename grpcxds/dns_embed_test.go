package grpcxds

import (
	"reflect"
	"testing"

	"google.golang.org/grpc/resolver"
)

// gRPC may add methods to resolver.ClientConn, and asks implementations it
// does not make to embed the interface so that such a release still
// builds. dnsWatch is handed to gRPC's dns resolver as its ClientConn.
func TestDNSWatchEmbedsResolverClientConn(t *testing.T) {
	f, ok := reflect.TypeFor[dnsWatch]().FieldByName("ClientConn")
	if !ok || !f.Anonymous || f.Type != reflect.TypeFor[resolver.ClientConn]() {
		t.Fatalf("dnsWatch does not embed resolver.ClientConn (field %+v, found %v)", f, ok)
	}
}
