package httpfilter

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/resources"
)

// testRequest is a request of headers by lower-case name, as a transport
// would show one; its path is "/p".
type testRequest map[string][]string

func pairs(kv ...string) testRequest {
	r := testRequest{}
	for i := 0; i+1 < len(kv); i += 2 {
		r[kv[i]] = append(r[kv[i]], kv[i+1])
	}
	return r
}

func (r testRequest) Get(name string) (string, bool) {
	vs, ok := r[name]
	if !ok {
		return "", false
	}
	return vs[0], true
}

func (r testRequest) Last(name string) (string, bool) {
	vs := r[name]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

func (r testRequest) AuthzRequest() extauthz.Request {
	return extauthz.Request{Path: "/p", Headers: r, HTTP: &extauthz.HTTPAttributes{Method: "GET", Host: "svc", Scheme: "http", Protocol: "HTTP/1.1", Size: -1}}
}

func (r testRequest) MutateHeaders(ms []extauthz.Mutation) { extauthz.Apply(r, ms) }

const typePrefix = "type.googleapis.com/"

// always aborts every request with code.
func always(code codes.Code) *resources.FaultConfig {
	return &resources.FaultConfig{Abort: &resources.FaultAbort{Code: code, Percentage: frac(100, 100)}}
}

// fakeAuthz answers checks with resp or err, and records them.
type fakeAuthz struct {
	resp  *extauthz.CheckResponse
	err   error
	got   []*extauthz.CheckRequest
	names []string
}

func (f *fakeAuthz) Client(gs *resources.GrpcService) (extauthz.Client, error) {
	f.names = append(f.names, gs.TargetURI)
	return f, nil
}

func (f *fakeAuthz) Check(_ context.Context, req *extauthz.CheckRequest) (*extauthz.CheckResponse, error) {
	f.got = append(f.got, req)
	return f.resp, f.err
}

// authzFilter is an ext_authz filter named name, decoded as a client
// would, after change.
func authzFilter(t *testing.T, name string, change func(*extauthzv3.ExtAuthz)) resources.HTTPFilter {
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
	return resources.HTTPFilter{Name: name, TypeURL: typePrefix + ExtAuthzConfigName, Parsed: c}
}

func router() resources.HTTPFilter {
	return resources.HTTPFilter{Name: "router", TypeURL: typePrefix + "envoy.extensions.filters.http.router.v3.Router", Parsed: &resources.RouterConfig{}, Terminal: true}
}

// A filter type with no client runtime makes the chain unusable, naming
// the filter and the client; an optional one is skipped.
func TestNewChainUnknownFilter(t *testing.T) {
	unknown := resources.HTTPFilter{Name: "odd", TypeURL: typePrefix + "goxds.test.Odd"}
	fault := resources.HTTPFilter{Name: "f", TypeURL: typePrefix + FaultConfigName, Parsed: always(codes.Internal)}
	c := NewChain(&resources.Listener{HTTPFilters: []resources.HTTPFilter{fault, unknown, router()}}, Env{Client: "an HTTP client"})
	want := `HTTP filter "odd" of type type.googleapis.com/goxds.test.Odd cannot run on an HTTP client`
	if err := c.Err(); err == nil || err.Error() != want {
		t.Errorf("Err() = %v, want %q", err, want)
	}
	if !c.Empty() {
		t.Error("a chain that cannot run has filters to run")
	}
	unknown.IsOptional = true
	c = NewChain(&resources.Listener{HTTPFilters: []resources.HTTPFilter{unknown, router()}}, Env{})
	if c.Err() != nil || !c.Empty() {
		t.Errorf("optional unknown filter: Err() = %v, Empty() = %v; want nil, true", c.Err(), c.Empty())
	}
	if !NewChain(nil, Env{}).Empty() {
		t.Error("the chain of no listener is not empty")
	}
}

// RunRoute runs each filter with its most specific override, skips one an
// override disables, and stops at the first denial.
func TestRunRouteOverrides(t *testing.T) {
	l := &resources.Listener{HTTPFilters: []resources.HTTPFilter{
		{Name: "f1", TypeURL: typePrefix + FaultConfigName, Parsed: always(codes.PermissionDenied)},
		{Name: "f2", TypeURL: typePrefix + FaultConfigName, Parsed: always(codes.DataLoss)},
		router(),
	}}
	c := NewChain(l, Env{})
	off := resources.DisabledFilterOverride{}
	vh := &resources.VirtualHost{FilterOverrides: map[string]resources.HTTPFilterConfig{"f1": always(codes.Aborted)}}
	rt := &resources.Route{
		FilterOverrides:  map[string]resources.HTTPFilterConfig{"f1": always(codes.NotFound)},
		WeightedClusters: []resources.WeightedCluster{{Name: "a"}, {Name: "b", FilterOverrides: map[string]resources.HTTPFilterConfig{"f1": off}}},
	}
	for _, tc := range []struct {
		name string
		vh   *resources.VirtualHost
		rt   *resources.Route
		wc   int
		want codes.Code
	}{
		{"listener's", nil, &resources.Route{}, -1, codes.PermissionDenied},
		{"virtual host's", vh, &resources.Route{}, -1, codes.Aborted},
		{"route's over the virtual host's", vh, rt, 0, codes.NotFound},
		{"weighted cluster's disables f1", vh, rt, 1, codes.DataLoss},
	} {
		res := c.RunRoute(context.Background(), tc.vh, tc.rt, tc.wc, pairs())
		if res.Denial == nil || codes.Code(res.Denial.Code) != tc.want {
			t.Errorf("%s: denial %+v, want code %v", tc.name, res.Denial, tc.want)
		}
	}
}

// Run runs the filters routing chose, by their index in the listener.
func TestRunDecisionFilters(t *testing.T) {
	l := &resources.Listener{HTTPFilters: []resources.HTTPFilter{
		{Name: "f1", TypeURL: typePrefix + FaultConfigName, Parsed: always(codes.PermissionDenied)},
		router(),
	}}
	c := NewChain(l, Env{})
	res := c.Run(context.Background(), []route.FilterConfig{{Index: 0, Filter: &l.HTTPFilters[0], Config: always(codes.ResourceExhausted)}}, pairs())
	if res.Denial == nil || codes.Code(res.Denial.Code) != codes.ResourceExhausted || res.Denial.Filter != "f1" {
		t.Errorf("denial %+v, want f1's RESOURCE_EXHAUSTED", res.Denial)
	}
	if res := c.Run(context.Background(), nil, pairs()); res.Denial != nil || res.Release != nil {
		t.Errorf("no filter chosen: %+v", res)
	}
}

// A fault abort in HTTP terms: the configured HTTP status, else the
// header's; one that gives a gRPC status only is answered as a gRPC
// error (HTTPStatus 0).
func TestFaultAbortHTTP(t *testing.T) {
	f := newFaultFilter(nil)
	code, _ := resources.HTTPStatusToCode(503)
	d := inject(f, &resources.FaultConfig{Abort: &resources.FaultAbort{Code: code, HTTPStatus: 503, Percentage: frac(100, 100)}}, nil)
	if d == nil || d.HTTPStatus != 503 || d.Body != "fault filter abort\n" || codes.Code(d.Code) != codes.Unavailable {
		t.Errorf("configured 503: %+v", d)
	}
	header := &resources.FaultConfig{Abort: &resources.FaultAbort{FromHeader: true, Percentage: frac(100, 100)}}
	if d := inject(f, header, pairs(faultAbortHTTPHeader, "429")); d == nil || d.HTTPStatus != 429 {
		t.Errorf("x-envoy-fault-abort-request: 429: %+v", d)
	}
	if d := inject(f, header, pairs(faultAbortGRPCHeader, "14")); d == nil || d.HTTPStatus != 0 || codes.Code(d.Code) != codes.Unavailable {
		t.Errorf("x-envoy-fault-abort-grpc-request: 14: %+v, want HTTP status 0 and UNAVAILABLE", d)
	}
}

// An allowed request goes on with the service's header changes, which the
// filters after it see; its response headers to add are returned. The
// service is told the request's HTTP attributes.
func TestAuthzAllowMutatesForLaterFilters(t *testing.T) {
	fa := &fakeAuthz{resp: &extauthz.CheckResponse{
		Headers:              []extauthz.HeaderOption{{Key: faultAbortHTTPHeader, Value: "418", Action: extauthz.OverwriteIfExistsOrAdd}},
		ResponseHeadersToAdd: []extauthz.HeaderOption{{Key: "x-note", Value: "checked"}},
	}}
	l := &resources.Listener{HTTPFilters: []resources.HTTPFilter{
		authzFilter(t, "authz", nil),
		{Name: "fault", TypeURL: typePrefix + FaultConfigName, Parsed: &resources.FaultConfig{Abort: &resources.FaultAbort{FromHeader: true, Percentage: frac(100, 100)}}},
		router(),
	}}
	c := NewChain(l, Env{Authz: fa})
	req := pairs("x-user", "alice")
	res := c.RunRoute(context.Background(), nil, &resources.Route{}, -1, req)
	if res.Denial == nil || res.Denial.HTTPStatus != 418 || res.Denial.Filter != "fault" {
		t.Fatalf("denial %+v, want the fault filter's 418 from the header the service added", res.Denial)
	}
	if len(fa.got) != 1 {
		t.Fatalf("%d checks, want 1", len(fa.got))
	}
	got := fa.got[0]
	if got.Method != "GET" || got.Host != "svc" || got.Scheme != "http" || got.Protocol != "HTTP/1.1" || got.Size != -1 || got.Path != "/p" ||
		!slices.Equal(got.Headers, []extauthz.HeaderValue{{Key: "x-user", Value: "alice"}}) || got.Time.IsZero() {
		t.Errorf("check request %+v", got)
	}

	l.HTTPFilters = slices.Delete(l.HTTPFilters, 1, 2)
	res = NewChain(l, Env{Authz: fa}).RunRoute(context.Background(), nil, &resources.Route{}, -1, pairs())
	if res.Denial != nil || !reflect.DeepEqual(res.ResponseHeaders, []extauthz.Mutation{{Key: "x-note", Value: "checked"}}) {
		t.Errorf("allowed: %+v, want x-note: checked to add to the response", res)
	}
}

// A denial carries the service's HTTP status (403 when unset), body and
// headers, and the gRPC code of the status; a service that cannot be
// asked fails the request with status_on_error's HTTP status and code, or
// lets it on with failure_mode_allow; no clients at all is such a failure.
func TestAuthzDenialAndFailure(t *testing.T) {
	ctx := context.Background()
	fa := &fakeAuthz{resp: &extauthz.CheckResponse{Code: int32(codes.PermissionDenied), DeniedStatus: 401, DeniedBody: "who are you?",
		DeniedHeaders: []extauthz.HeaderOption{{Key: "www-authenticate", Value: "Bearer"}}}}
	l := &resources.Listener{HTTPFilters: []resources.HTTPFilter{authzFilter(t, "authz", nil), router()}}
	d := NewChain(l, Env{Authz: fa}).RunRoute(ctx, nil, &resources.Route{}, -1, pairs()).Denial
	if d == nil || d.HTTPStatus != 401 || d.Body != "who are you?" || codes.Code(d.Code) != codes.Unauthenticated ||
		!reflect.DeepEqual(d.Headers, []extauthz.Mutation{{Key: "www-authenticate", Value: "Bearer"}}) {
		t.Errorf("denied: %+v", d)
	}
	fa.resp.DeniedStatus = 0
	if d := NewChain(l, Env{Authz: fa}).RunRoute(ctx, nil, &resources.Route{}, -1, pairs()).Denial; d == nil || d.HTTPStatus != 403 || codes.Code(d.Code) != codes.PermissionDenied {
		t.Errorf("denied without a status: %+v, want 403 (PERMISSION_DENIED)", d)
	}

	down := &fakeAuthz{err: errors.New("connection refused")}
	l.HTTPFilters[0] = authzFilter(t, "authz", func(m *extauthzv3.ExtAuthz) {
		m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
	})
	for _, env := range []Env{{Authz: down}, {}} {
		d := NewChain(l, env).RunRoute(ctx, nil, &resources.Route{}, -1, pairs()).Denial
		if d == nil || d.HTTPStatus != 503 || codes.Code(d.Code) != codes.Unavailable {
			t.Errorf("service down (clients %v): %+v, want status_on_error 503 (UNAVAILABLE)", env.Authz, d)
		}
	}
	l.HTTPFilters[0] = authzFilter(t, "authz", func(m *extauthzv3.ExtAuthz) { m.FailureModeAllow, m.FailureModeAllowHeaderAdd = true, true })
	req := pairs()
	if res := NewChain(l, Env{Authz: down}).RunRoute(ctx, nil, &resources.Route{}, -1, req); res.Denial != nil || req[extauthz.FailureModeAllowedHeader][0] != "true" {
		t.Errorf("failure_mode_allow: %+v, headers %v", res, req)
	}
	l.HTTPFilters[0] = authzFilter(t, "authz", nil)
	if d := NewChain(l, Env{Authz: down}).RunRoute(ctx, nil, &resources.Route{}, -1, pairs()).Denial; d == nil || d.HTTPStatus != 403 {
		t.Errorf("service down, status_on_error unset: %+v, want 403", d)
	}
}

// An ExtAuthzPerRoute override runs the top-level configuration; a
// disabled override skips the check.
func TestAuthzPerRoute(t *testing.T) {
	fa := &fakeAuthz{resp: &extauthz.CheckResponse{}}
	l := &resources.Listener{HTTPFilters: []resources.HTTPFilter{authzFilter(t, "authz", nil), router()}}
	c := NewChain(l, Env{Authz: fa})
	rt := &resources.Route{FilterOverrides: map[string]resources.HTTPFilterConfig{"authz": &resources.ExtAuthzPerRouteConfig{}}}
	if res := c.RunRoute(context.Background(), nil, rt, -1, pairs()); res.Denial != nil || len(fa.got) != 1 || fa.names[0] != "dns:///authz:1" {
		t.Errorf("per-route override: %+v, %d checks to %v", res, len(fa.got), fa.names)
	}
	rt.FilterOverrides["authz"] = resources.DisabledFilterOverride{}
	if res := c.RunRoute(context.Background(), nil, rt, -1, pairs()); res.Denial != nil || len(fa.got) != 1 {
		t.Errorf("disabled: %+v, %d checks, want no new one", res, len(fa.got))
	}
}

// What filters start is released in reverse when a later one denies, and
// by Result.Release otherwise.
func TestReleases(t *testing.T) {
	var log []string
	starter := func(name string, deny bool) Runtime {
		return runtimeFunc(func() (func(), *Denial) {
			if deny {
				return nil, &Denial{Filter: name}
			}
			return func() { log = append(log, name) }, nil
		})
	}
	var r run
	ctx := context.Background()
	r.step(ctx, starter("a", false), nil, pairs())
	r.step(ctx, starter("b", false), nil, pairs())
	res := r.result()
	res.Release()
	if !slices.Equal(log, []string{"b", "a"}) {
		t.Errorf("released %v, want b then a", log)
	}
	log, r = nil, run{}
	r.step(ctx, starter("a", false), nil, pairs())
	r.step(ctx, starter("b", false), nil, pairs())
	if r.step(ctx, starter("c", true), nil, pairs()) {
		t.Error("step went on after a denial")
	}
	if res := r.result(); res.Release != nil || res.Denial == nil || !slices.Equal(log, []string{"b", "a"}) {
		t.Errorf("after a denial: %+v, released %v", res, log)
	}
}

type runtimeFunc func() (func(), *Denial)

func (f runtimeFunc) Start(context.Context, resources.HTTPFilterConfig, Request) (func(), []extauthz.Mutation, *Denial) {
	release, d := f()
	return release, nil, d
}
