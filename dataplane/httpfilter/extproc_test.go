package httpfilter

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/resources"
)

// procClientsFunc gives every GrpcService the client f makes.
type procClientsFunc func(gs *resources.GrpcService) (extproc.Client, error)

func (f procClientsFunc) ProcClient(gs *resources.GrpcService) (extproc.Client, error) { return f(gs) }

func extProcFilter(optional bool) resources.HTTPFilter {
	return resources.HTTPFilter{Name: "proc", TypeURL: typePrefix + ExtProcConfigName, IsOptional: optional,
		Parsed: &resources.ExtProcConfig{GrpcService: &resources.GrpcService{TargetURI: "dns:///proc.example.com"},
			Modes: resources.ExtProcModes{RequestHeaders: true}}}
}

// A transport that gives no processing clients (the HTTP client) cannot
// run the external processing filter: a chain that requires it cannot
// run, naming it; an optional one is skipped.
func TestExtProcNeedsProcClients(t *testing.T) {
	c := NewChain(&resources.Listener{HTTPFilters: []resources.HTTPFilter{extProcFilter(false), router()}}, Env{Client: "an HTTP client"})
	want := `HTTP filter "proc" of type type.googleapis.com/` + ExtProcConfigName + ` cannot run on an HTTP client`
	if err := c.Err(); err == nil || err.Error() != want {
		t.Errorf("Err() = %v, want %q", err, want)
	}
	c = NewChain(&resources.Listener{HTTPFilters: []resources.HTTPFilter{extProcFilter(true), router()}}, Env{Client: "an HTTP client"})
	if c.Err() != nil || !c.Empty() {
		t.Errorf("optional ext_proc: Err() = %v, Empty() = %v; want nil, true", c.Err(), c.Empty())
	}
}

// A processor that cannot be reached denies the request with INTERNAL,
// naming the filter and why; the denial releases the call, and a request
// whose transport cannot replace headers is denied before any stream.
func TestExtProcHeadersDenial(t *testing.T) {
	down := procClientsFunc(func(*resources.GrpcService) (extproc.Client, error) { return nil, errors.New("no route to proc") })
	l := &resources.Listener{HTTPFilters: []resources.HTTPFilter{extProcFilter(false), router()}}
	c := NewChain(l, Env{Procs: down})
	if c.Err() != nil || c.Empty() {
		t.Fatalf("Err() = %v, Empty() = %v; want a chain to run", c.Err(), c.Empty())
	}
	res := c.RunRoute(context.Background(), nil, &resources.Route{}, -1, replacing{pairs()})
	if d := res.Denial; d == nil || d.Code != codeInternal || d.Filter != "proc" || !strings.Contains(d.Message, "no route to proc") {
		t.Fatalf("denial %+v, want INTERNAL from proc naming the failure", res.Denial)
	}
	if res.Procs != nil || res.Release != nil {
		t.Errorf("a denied request kept procs %v, release set %v", res.Procs, res.Release != nil)
	}
	res = c.RunRoute(context.Background(), nil, &resources.Route{}, -1, pairs())
	if d := res.Denial; d == nil || !strings.Contains(d.Message, "cannot replace a request's headers") {
		t.Fatalf("denial %+v on a transport without HeaderReplacer", res.Denial)
	}
}

// replacing is a request whose headers can be replaced.
type replacing struct{ testRequest }

func (r replacing) ReplaceHeaders(h map[string][]string) {
	for k := range r.testRequest {
		delete(r.testRequest, k)
	}
	for k, v := range h {
		r.testRequest[k] = v
	}
}
