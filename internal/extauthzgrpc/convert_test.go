package extauthzgrpc

import (
	"net/netip"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/goxds/xds/dataplane/extauthz"
)

// A header's value is its raw_value when set, else its legacy value,
// -bin or not (gRFC A102); a missing header becomes an empty name, which
// the data plane rejects.
func TestHeaderOptions(t *testing.T) {
	got := headerOptions([]*corev3.HeaderValueOption{
		{Header: &corev3.HeaderValue{Key: "x-a", Value: "v", RawValue: []byte("raw")}, AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT},
		{Header: &corev3.HeaderValue{Key: "x-b-bin", Value: "v", RawValue: []byte{0, 1}}, KeepEmptyValue: true},
		{Header: &corev3.HeaderValue{Key: "x-c", Value: "legacy"}},
		{Header: &corev3.HeaderValue{Key: "x-d-bin", Value: "legacy"}},
		{},
	})
	want := []extauthz.HeaderOption{
		{Key: "x-a", Value: "raw", Action: extauthz.AddIfAbsent},
		{Key: "x-b-bin", Value: "\x00\x01", KeepEmptyValue: true},
		{Key: "x-c", Value: "legacy"},
		{Key: "x-d-bin", Value: "legacy"},
		{},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// The request's attributes in the proto: peers with IPv4-mapped
// addresses unmapped, headers as raw values.
func TestCheckRequestProto(t *testing.T) {
	m := checkRequest(&extauthz.CheckRequest{
		Source:  &extauthz.Peer{Address: netip.MustParseAddrPort("[::ffff:10.0.0.2]:5000"), Principal: "spiffe://td/c", Certificate: "pem"},
		Time:    time.Unix(5, 0),
		Path:    "/s/m",
		Headers: []extauthz.HeaderValue{{Key: "x-a", Value: "1"}},
	})
	a := m.GetAttributes()
	if sa := a.GetSource().GetAddress().GetSocketAddress(); sa.GetAddress() != "10.0.0.2" || sa.GetPortValue() != 5000 ||
		a.GetSource().GetPrincipal() != "spiffe://td/c" || a.GetSource().GetCertificate() != "pem" || a.GetDestination() != nil {
		t.Errorf("peers %v, %v", a.GetSource(), a.GetDestination())
	}
	h := a.GetRequest().GetHttp()
	if a.GetRequest().GetTime().GetSeconds() != 5 || h.GetPath() != "/s/m" || h.GetMethod() != "POST" || h.GetSize() != -1 ||
		h.GetProtocol() != "HTTP/2" || len(h.GetHeaderMap().GetHeaders()) != 1 || string(h.GetHeaderMap().GetHeaders()[0].GetRawValue()) != "1" {
		t.Errorf("request %v", a.GetRequest())
	}
	if h.GetHeaders() != nil {
		t.Errorf("a gRPC request's headers in the string map too: %v", h.GetHeaders())
	}
}

// A plain HTTP request's attributes are its own, and its headers are
// also in the string map Envoy's HTTP filter fills by default.
func TestCheckRequestProtoHTTP(t *testing.T) {
	m := checkRequest(&extauthz.CheckRequest{Path: "/a?b=1", Method: "PUT", Host: "svc", Scheme: "https", Protocol: "HTTP/1.1", Size: 3, HTTP: true,
		Headers: []extauthz.HeaderValue{{Key: ":method", Value: "PUT"}, {Key: "x-a", Value: "1,2"}}})
	h := m.GetAttributes().GetRequest().GetHttp()
	if h.GetMethod() != "PUT" || h.GetHost() != "svc" || h.GetScheme() != "https" || h.GetProtocol() != "HTTP/1.1" || h.GetSize() != 3 || h.GetPath() != "/a?b=1" {
		t.Errorf("request %v", h)
	}
	if hs := h.GetHeaders(); len(hs) != 2 || hs["x-a"] != "1,2" || hs[":method"] != "PUT" || len(h.GetHeaderMap().GetHeaders()) != 2 {
		t.Errorf("headers %v, header_map %v", hs, h.GetHeaderMap())
	}
}

// A denial's status message reaches the data plane, for the RPC's own
// message (gRFC A92).
func TestCheckResponseMessage(t *testing.T) {
	got := checkResponse(&authv3.CheckResponse{Status: &statuspb.Status{Code: 7, Message: "token expired"}})
	if got.Code != 7 || got.Message != "token expired" {
		t.Errorf("response %+v", got)
	}
}
