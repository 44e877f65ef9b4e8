package extauthz_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/netip"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// gRPC status codes, by number (the data plane's tests do not import
// grpc-go either).
const (
	codeUnknown          = 2
	codePermissionDenied = 7
	codeUnavailable      = 14
	codeUnauthenticated  = 16
)

// config decodes an ExtAuthz message after change, as a client would.
func config(t *testing.T, change func(m *extauthzv3.ExtAuthz)) *resources.ExtAuthzConfig {
	t.Helper()
	m := &extauthzv3.ExtAuthz{Services: &extauthzv3.ExtAuthz_GrpcService{GrpcService: &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{TargetUri: "dns:///authz:1"}},
	}}}
	if change != nil {
		change(m)
	}
	c, err := resources.NewExtAuthzConfig(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeClient answers every check with resp or err, and records the last
// request and whether its context had a deadline.
type fakeClient struct {
	resp        *extauthz.CheckResponse
	err         error
	got         *extauthz.CheckRequest
	hadDeadline time.Duration
}

func (f *fakeClient) Check(ctx context.Context, req *extauthz.CheckRequest) (*extauthz.CheckResponse, error) {
	f.got = req
	if dl, ok := ctx.Deadline(); ok {
		f.hadDeadline = time.Until(dl)
	}
	return f.resp, f.err
}

func request() *extauthz.Request {
	return &extauthz.Request{Path: "/pkg.Svc/M", Time: time.Unix(100, 0), Headers: map[string][]string{
		"x-user": {"alice"}, "x-multi": {"a", "b"}, "x-secret": {"s"}, "trace-bin": {"\x00\x01"}, "keep": {"k"},
	}}
}

func TestAllowWithHeaderMutations(t *testing.T) {
	cfg := config(t, func(m *extauthzv3.ExtAuthz) {
		m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{DisallowExpression: &matcherv3.RegexMatcher{Regex: "x-fixed"}}
	})
	fc := &fakeClient{resp: &extauthz.CheckResponse{
		Headers: []extauthz.HeaderOption{
			{Key: "x-user", Value: "bob", Action: extauthz.AppendIfExistsOrAdd},
			{Key: "x-multi", Value: "c", Action: extauthz.OverwriteIfExistsOrAdd},
			{Key: "x-absent", Value: "no", Action: extauthz.OverwriteIfExists},
			{Key: "keep", Value: "no", Action: extauthz.AddIfAbsent},
			{Key: "x-new", Value: "", Action: extauthz.AppendIfExistsOrAdd, KeepEmptyValue: true},
			{Key: "x-secret", Value: "", Action: extauthz.OverwriteIfExistsOrAdd}, // empty: kept (gRFC A102)
			{Key: "x-fixed", Value: "1", Action: extauthz.OverwriteIfExistsOrAdd}, // disallowed: ignored
		},
		HeadersToRemove:      []string{"trace-bin", "host"}, // host: never changed
		ResponseHeadersToAdd: []extauthz.HeaderOption{{Key: "x-resp", Value: "r", Action: extauthz.AppendIfExistsOrAdd}},
	}}
	c := &extauthz.Checker{Config: cfg, Client: fc}
	req := request()
	d := c.Check(context.Background(), req)
	if !d.Allow || d.Outcome != extauthz.Allowed {
		t.Fatalf("decision %+v", d)
	}
	h := map[string][]string{}
	for k, v := range req.Headers {
		h[k] = append([]string(nil), v...)
	}
	h[":path"] = []string{"/pkg.Svc/M"}
	extauthz.Apply(h, d.RequestHeaders)
	want := map[string][]string{
		"x-user": {"alice", "bob"}, "x-multi": {"c"}, "keep": {"k"}, "x-new": {""}, "x-secret": {""}, ":path": {"/pkg.Svc/M"},
	}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("request headers %v, want %v", h, want)
	}
	resp := map[string][]string{}
	extauthz.Apply(resp, d.ResponseHeaders)
	if !reflect.DeepEqual(resp, map[string][]string{"x-resp": {"r"}}) {
		t.Fatalf("response headers %v", resp)
	}
}

func TestDenyWithStatusAndTrailers(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   uint32
	}{{0, codePermissionDenied}, {401, codeUnauthenticated}, {503, codeUnavailable}, {418, codeUnknown}} {
		fc := &fakeClient{resp: &extauthz.CheckResponse{Code: 7, DeniedStatus: tc.status, DeniedHeaders: []extauthz.HeaderOption{
			{Key: "x-reason", Value: "no", Action: extauthz.AppendIfExistsOrAdd},
		}}}
		d := (&extauthz.Checker{Config: config(t, nil), Client: fc}).Check(context.Background(), request())
		if d.Allow || d.Outcome != extauthz.Denied || d.Code != tc.want {
			t.Fatalf("HTTP %d: decision %+v, want code %d", tc.status, d, tc.want)
		}
		tr := map[string][]string{}
		extauthz.Apply(tr, d.Trailers)
		if !reflect.DeepEqual(tr, map[string][]string{"x-reason": {"no"}}) {
			t.Fatalf("trailers %v", tr)
		}
	}
}

// A call that fails fails the request with status_on_error, unless
// failure_mode_allow; a malformed answer counts as a failed call.
func TestFailureMode(t *testing.T) {
	down := &fakeClient{err: errors.New("connection refused")}
	malformed := &fakeClient{resp: &extauthz.CheckResponse{Headers: []extauthz.HeaderOption{{Key: "X-Upper", Value: "v"}}}}
	for _, fc := range []*fakeClient{down, malformed} {
		cfg := config(t, func(m *extauthzv3.ExtAuthz) {
			m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
		})
		d := (&extauthz.Checker{Config: cfg, Client: fc}).Check(context.Background(), request())
		if d.Allow || d.Outcome != extauthz.Failed || d.Code != codeUnavailable {
			t.Fatalf("closed: decision %+v", d)
		}
		cfg = config(t, func(m *extauthzv3.ExtAuthz) { m.FailureModeAllow, m.FailureModeAllowHeaderAdd = true, true })
		d = (&extauthz.Checker{Config: cfg, Client: fc}).Check(context.Background(), request())
		h := map[string][]string{}
		extauthz.Apply(h, d.RequestHeaders)
		if !d.Allow || d.Outcome != extauthz.Failed || !reflect.DeepEqual(h, map[string][]string{extauthz.FailureModeAllowedHeader: {"true"}}) {
			t.Fatalf("open: decision %+v, headers %v", d, h)
		}
	}
	if !strings.Contains((&extauthz.Checker{Config: config(t, nil), Client: down}).Check(context.Background(), request()).Message, "connection refused") {
		t.Fatal("the failure's message does not say why")
	}
}

// disallow_is_error turns a disallowed change into a failure (Envoy's 500).
func TestDisallowIsError(t *testing.T) {
	cfg := config(t, func(m *extauthzv3.ExtAuthz) {
		m.FailureModeAllow = true // not a failed call: the service answered
		m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{DisallowAll: wrapperspb.Bool(true), DisallowIsError: wrapperspb.Bool(true)}
	})
	for _, resp := range []*extauthz.CheckResponse{
		{Headers: []extauthz.HeaderOption{{Key: "x-a", Value: "1"}}},
		{HeadersToRemove: []string{"x-a"}},
	} {
		d := (&extauthz.Checker{Config: cfg, Client: &fakeClient{resp: resp}}).Check(context.Background(), request())
		if d.Allow || d.Code != codeUnknown || !strings.Contains(d.Message, `"x-a"`) {
			t.Fatalf("decision %+v", d)
		}
	}
	// A pseudo-header is not a header name (gRFC A92): the answer is
	// malformed before the rules are asked, and failure_mode_allow lets
	// the request on.
	d := (&extauthz.Checker{Config: cfg, Client: &fakeClient{resp: &extauthz.CheckResponse{HeadersToRemove: []string{":path"}}}}).Check(context.Background(), request())
	if !d.Allow || d.Outcome != extauthz.Failed || len(d.RequestHeaders) != 0 {
		t.Fatalf("decision %+v", d)
	}
}

func TestFilterEnabled(t *testing.T) {
	half := func(deny bool) func(m *extauthzv3.ExtAuthz) {
		return func(m *extauthzv3.ExtAuthz) {
			m.FilterEnabled = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 50}}
			if deny {
				m.DenyAtDisable = &corev3.RuntimeFeatureFlag{DefaultValue: wrapperspb.Bool(true)}
			}
		}
	}
	for _, tc := range []struct {
		draw      uint32
		deny      bool
		allow     bool
		outcome   extauthz.Outcome
		wantAsked bool
	}{
		{49, false, true, extauthz.Allowed, true},
		{50, false, true, extauthz.Disabled, false},
		{50, true, false, extauthz.Disabled, false},
	} {
		fc := &fakeClient{resp: &extauthz.CheckResponse{}}
		c := &extauthz.Checker{Config: config(t, half(tc.deny)), Client: fc, Rand: func(n uint32) uint32 {
			if n != 100 {
				t.Fatalf("drawn from [0, %d)", n)
			}
			return tc.draw
		}}
		d := c.Check(context.Background(), request())
		if d.Allow != tc.allow || d.Outcome != tc.outcome || (fc.got != nil) != tc.wantAsked || (!d.Allow && d.Code != codePermissionDenied) {
			t.Fatalf("draw %d, deny %v: decision %+v, asked %v", tc.draw, tc.deny, d, fc.got != nil)
		}
	}
}

func TestCheckRequest(t *testing.T) {
	cfg := config(t, func(m *extauthzv3.ExtAuthz) {
		m.AllowedHeaders = &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{
			{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "x-"}},
			{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "-bin"}},
		}}
		m.DisallowedHeaders = &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x-secret"}}}}
		m.IncludePeerCertificate = true
		m.GetGrpcService().Timeout = durationpb.New(time.Hour)
	})
	fc := &fakeClient{resp: &extauthz.CheckResponse{}}
	req := request()
	req.Server = true
	req.Local, req.Remote = netip.MustParseAddrPort("10.0.0.1:443"), netip.MustParseAddrPort("10.0.0.2:5000")
	spiffe, _ := url.Parse("spiffe://example.org/client")
	req.PeerCertificates = []*x509.Certificate{{Raw: []byte("der"), URIs: []*url.URL{spiffe}, DNSNames: []string{"client.example.org"}}}
	req.LocalCertificate = &x509.Certificate{Subject: pkix.Name{CommonName: "server", Organization: []string{"Example"}}}
	(&extauthz.Checker{Config: cfg, Client: fc}).Check(context.Background(), req)
	got := fc.got
	wantHeaders := []extauthz.HeaderValue{{Key: "trace-bin", Value: "AAE"}, {Key: "x-multi", Value: "a,b"}, {Key: "x-user", Value: "alice"}}
	if !reflect.DeepEqual(got.Headers, wantHeaders) || got.Path != "/pkg.Svc/M" || !got.Time.Equal(time.Unix(100, 0)) {
		t.Fatalf("request %+v", got)
	}
	if got.Source.Address != req.Remote || got.Source.Principal != "spiffe://example.org/client" ||
		got.Destination.Address != req.Local || got.Destination.Principal != "CN=server,O=Example" {
		t.Fatalf("source %+v, destination %+v", got.Source, got.Destination)
	}
	if cert, err := url.QueryUnescape(got.Source.Certificate); err != nil || !strings.HasPrefix(cert, "-----BEGIN CERTIFICATE-----\n") || strings.Contains(got.Source.Certificate, "\n") {
		t.Fatalf("certificate %q (%v)", got.Source.Certificate, err)
	}
	if fc.hadDeadline <= 0 || fc.hadDeadline > time.Hour {
		t.Fatalf("the call's deadline was %v away, want the GrpcService timeout", fc.hadDeadline)
	}

	// A client's request has no peers, and without a timeout no deadline.
	fc = &fakeClient{resp: &extauthz.CheckResponse{}}
	(&extauthz.Checker{Config: config(t, nil), Client: fc}).Check(context.Background(), request())
	if fc.got.Source != nil || fc.got.Destination != nil || fc.hadDeadline != 0 || len(fc.got.Headers) != 5 {
		t.Fatalf("client request %+v, deadline %v", fc.got, fc.hadDeadline)
	}
	if extauthz.Principal(&x509.Certificate{DNSNames: []string{"a.example"}}) != "a.example" {
		t.Fatal("principal of a DNS SAN certificate")
	}
}

// A plain HTTP request tells the service its own method, host, scheme,
// protocol and size, and its -bin headers are text; a gRPC one the fixed
// attributes of a gRPC request.
func TestBuildCheckRequestHTTP(t *testing.T) {
	req := request()
	got := extauthz.BuildCheckRequest(config(t, nil), req)
	if got.Method != extauthz.RequestMethod || got.Protocol != extauthz.RequestProtocol || got.Size != extauthz.RequestSize || got.Host != "" {
		t.Errorf("gRPC request's attributes %q %q %d %q", got.Method, got.Protocol, got.Size, got.Host)
	}
	req.HTTP = &extauthz.HTTPAttributes{Method: "PUT", Host: "svc.test", Scheme: "https", Protocol: "HTTP/1.1", Size: 12}
	got = extauthz.BuildCheckRequest(config(t, nil), req)
	if got.Method != "PUT" || got.Host != "svc.test" || got.Scheme != "https" || got.Protocol != "HTTP/1.1" || got.Size != 12 {
		t.Errorf("HTTP request's attributes %+v", got)
	}
	for _, h := range got.Headers {
		if h.Key == "trace-bin" && h.Value != "\x00\x01" {
			t.Errorf("HTTP request's trace-bin sent as %q, want its text", h.Value)
		}
	}
}

// What an HTTP client answers: denied_response's status (403 when unset)
// and body; status_on_error's HTTP status (403 when unset) when the
// service cannot be asked; 500 for a disallowed change made an error.
func TestDecisionHTTPStatus(t *testing.T) {
	ctx := context.Background()
	d := (&extauthz.Checker{Config: config(t, nil), Client: &fakeClient{resp: &extauthz.CheckResponse{Code: codePermissionDenied, DeniedStatus: 429, DeniedBody: "slow down"}}}).Check(ctx, request())
	if d.Allow || d.HTTPStatus != 429 || d.Body != "slow down" || d.Code != codeUnavailable {
		t.Errorf("denied with 429: %+v", d)
	}
	d = (&extauthz.Checker{Config: config(t, nil), Client: &fakeClient{resp: &extauthz.CheckResponse{Code: codePermissionDenied}}}).Check(ctx, request())
	if d.HTTPStatus != 403 || d.Code != codePermissionDenied {
		t.Errorf("denied without a status: %+v", d)
	}
	down := &fakeClient{err: errors.New("unreachable")}
	if d := (&extauthz.Checker{Config: config(t, nil), Client: down}).Check(ctx, request()); d.HTTPStatus != 403 {
		t.Errorf("service down, status_on_error unset: %+v", d)
	}
	cfg := config(t, func(m *extauthzv3.ExtAuthz) { m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_BadGateway} })
	if d := (&extauthz.Checker{Config: cfg, Client: down}).Check(ctx, request()); d.HTTPStatus != 502 || d.Code != codeUnavailable {
		t.Errorf("service down, status_on_error 502: %+v", d)
	}
	cfg = config(t, func(m *extauthzv3.ExtAuthz) {
		m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{DisallowAll: wrapperspb.Bool(true), DisallowIsError: wrapperspb.Bool(true)}
	})
	ok := &fakeClient{resp: &extauthz.CheckResponse{Headers: []extauthz.HeaderOption{{Key: "x-a", Value: "1"}}}}
	if d := (&extauthz.Checker{Config: cfg, Client: ok}).Check(ctx, request()); d.Allow || d.HTTPStatus != 500 {
		t.Errorf("disallowed change with disallow_is_error: %+v, want HTTP 500", d)
	}
}
