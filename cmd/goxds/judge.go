package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// validate's verdicts are a real client's, not a copy of its rules: the
// response is handed to a client.Client, built from the bootstrap, through
// a transport of this file's (memTransport) that carries nothing over a
// network. The client watches every resource the response names, applies
// the response as it would one from its server, and returns the verdict
// the transport would send: nil to ACK, or the error whose text is the
// NACK's error_detail. So whatever the client checks (decoding, duplicate
// names, type URLs, wrappers, the context decoders get from the sending
// server and the bootstrap) validate checks the same way, with the same
// words.

// Verdicts on one resource.
const (
	verdictAccepted = "ACCEPTED"     // decoded and valid: a client uses it
	verdictNACKed   = "NACKED"       // rejected: the response is NACKed
	verdictUnnamed  = "UNNAMED"      // no name can be read: a client watching by name never uses it
	verdictRefused  = "REFUSED"      // its name cannot be watched with this bootstrap (an xdstp:// authority it lacks)
	verdictServer   = "SERVER ERROR" // named in the response's resource_errors (gRFC A88): no NACK, the resource is unusable
	verdictNone     = "NO VERDICT"
)

// judgement is what a client made of one response.
type judgement struct {
	// Count is how many resources the response holds.
	Count int
	// Judged tells whether a client judged the response: not when no
	// name in it could be watched.
	Judged bool
	// Resources are the verdicts, one per name, in the order the names
	// first appear in the response, nameless ones by position.
	Resources []resourceVerdict
	// NACKs are the NACKs the response got, one per server it was judged
	// as coming from (the servers of the names' authorities); none if it
	// was ACKed.
	NACKs []nackDetail
}

type resourceVerdict struct {
	Index   int    // position in the response, from 0
	Name    string // "" for an unnamed one
	Verdict string
	Err     error              // why it is not ACCEPTED
	Value   resources.Resource // the decoded value, when ACCEPTED
}

type nackDetail struct {
	Server      string // server_uri
	ErrorDetail string
}

// judge hands resp, a SotW response of typ, to a client made from cfg,
// and reports its verdicts.
func judge(ctx context.Context, cfg *bootstrap.Config, typ resources.AnyType, resp *discoveryv3.DiscoveryResponse, logger *slog.Logger) (*judgement, error) {
	j := &judgement{Count: len(resp.GetResources())}
	type named struct {
		index int
		name  string
	}
	var names []named
	seen := make(map[string]bool)
	for i, a := range resp.GetResources() {
		name, err := resourceName(typ, a)
		switch {
		case name == "":
			j.Resources = append(j.Resources, resourceVerdict{Index: i, Verdict: verdictUnnamed, Err: err})
		case !seen[name]:
			seen[name] = true
			names = append(names, named{i, name})
		}
	}
	// Names the server reports errors for (resource_errors, gRFC A88)
	// are watched too: what a client makes of them is part of the
	// verdict, though they are no NACK.
	for _, re := range resp.GetResourceErrors() {
		if name := re.GetResourceName().GetName(); name != "" && !seen[name] {
			seen[name] = true
			names = append(names, named{len(resp.GetResources()) + len(names), name})
		}
	}
	if len(names) == 0 {
		return j, nil
	}

	b := &memBuilder{changed: make(chan struct{}, 1)}
	c, err := client.New(cfg, client.Options{TransportBuilder: b, Logger: logger, Registry: grpcRegistry()})
	if err != nil {
		return nil, fmt.Errorf("the bootstrap makes no client: %w", err)
	}
	defer c.Close()
	sinks := make([]*sink, len(names))
	for k, n := range names {
		sinks[k] = &sink{told: make(chan struct{})}
		defer c.WatchResource(typ.TypeURL(), n.name, sinks[k])()
	}
	// Which server each name is asked of is the client's to say (the
	// top-level servers, or an xdstp:// authority's): its dump knows.
	want := make(map[string][]string)
	for _, st := range c.Dump() {
		want[st.Server] = append(want[st.Server], st.Name)
	}
	servers, err := b.waitSubscribed(ctx, typ.TypeURL(), want)
	if err != nil {
		return nil, err
	}
	r := &transport.Response{
		TypeURL:        resp.GetTypeUrl(),
		Version:        resp.GetVersionInfo(),
		Nonce:          cmpOrNonce(resp.GetNonce()),
		Resources:      resp.GetResources(),
		ResourceErrors: resp.GetResourceErrors(),
		ControlPlane:   resp.GetControlPlane().GetIdentifier(),
	}
	j.Judged = len(servers) > 0
	for _, t := range servers {
		done := make(chan struct{})
		verdict := t.h.OnResponse(r, func() { close(done) })
		select {
		case <-done: // every watcher has been told
		case <-ctx.Done():
			return nil, fmt.Errorf("the client did not finish judging the response: %w", ctx.Err())
		}
		if verdict != nil {
			j.NACKs = append(j.NACKs, nackDetail{Server: t.server.ServerURI, ErrorDetail: verdict.Error()})
		}
	}
	if len(servers) == 0 {
		// Every watch was refused (names of an authority the bootstrap
		// lacks): no response was judged, whose done would come after
		// the refusals. Wait for each.
		for _, s := range sinks {
			if err := s.wait(ctx); err != nil {
				return nil, err
			}
		}
	}

	dump := make(map[string]client.ResourceStatus)
	for _, st := range c.Dump() {
		dump[st.Name] = st
	}
	for k, n := range names {
		v := resourceVerdict{Index: n.index, Name: n.name}
		value, err := sinks[k].result()
		var ce *client.Error
		switch {
		case value != nil:
			v.Verdict, v.Value = verdictAccepted, value
		case err == nil:
			v.Verdict = verdictNone
			if st, ok := dump[n.name]; ok {
				v.Err = fmt.Errorf("the client's status of it is %v", st.Status)
			}
		case errors.As(err, &ce) && dump[ce.Name].Status == client.StatusReceivedError:
			v.Verdict, v.Err = verdictServer, dump[ce.Name].Err
		case errors.As(err, &ce) && dump[ce.Name].Status == client.StatusNACKed:
			// The cause as the client recorded it: the words of the
			// error_detail, not the watcher's wrapping of them.
			v.Verdict, v.Err = verdictNACKed, dump[ce.Name].Err
		case errors.As(err, &ce) && dump[ce.Name].Name == "":
			v.Verdict, v.Err = verdictRefused, err // never made an entry: the watch was refused
		default:
			v.Verdict, v.Err = verdictNACKed, err
		}
		j.Resources = append(j.Resources, v)
	}
	slices.SortStableFunc(j.Resources, func(a, b resourceVerdict) int { return a.Index - b.Index })
	return j, nil
}

func cmpOrNonce(n string) string {
	if n == "" {
		return "goxds-validate"
	}
	return n
}

// resourceName is the name a client finds for a resource: its wrapper's,
// else the one its body gives when decoded (as the client does), "" if
// there is none; err is why, when it can be told.
func resourceName(typ resources.AnyType, a *anypb.Any) (string, error) {
	env, err := resources.Unwrap(a)
	if err != nil {
		return "", err
	}
	if env.Name != "" {
		return env.Name, nil
	}
	if env.Body == nil {
		return "", errors.New("a wrapped resource without a name or a body")
	}
	if env.Body.GetTypeUrl() != typ.TypeURL() {
		return "", fmt.Errorf("type_url %q in a response for %s", env.Body.GetTypeUrl(), typ.TypeURL())
	}
	name, _, err := typ.Decode(nil, env.Body) // only the name: the client judges it
	if name == "" && err == nil {
		err = errors.New("the resource has no name")
	}
	return name, err
}

// sink is the watcher of one name: what it was last told.
type sink struct {
	mu    sync.Mutex
	value resources.Resource
	err   error
	told  chan struct{} // closed at the first event
	once  sync.Once
}

func (s *sink) Update(v resources.Resource) { s.set(v, nil) }
func (s *sink) ResourceError(err error)     { s.set(nil, err) }
func (s *sink) AmbientError(err error) {
	s.mu.Lock()
	v := s.value
	s.mu.Unlock()
	s.set(v, err)
}

func (s *sink) set(v resources.Resource, err error) {
	s.mu.Lock()
	s.value, s.err = v, err
	s.mu.Unlock()
	s.once.Do(func() { close(s.told) })
}

// wait waits for the first event, until ctx is done.
func (s *sink) wait(ctx context.Context) error {
	select {
	case <-s.told:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the client said nothing of a resource: %w", ctx.Err())
	}
}

func (s *sink) result() (resources.Resource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value, s.err
}

// memBuilder makes memTransports and keeps them, for judge to hand them
// the response once the client has subscribed.
type memBuilder struct {
	mu         sync.Mutex
	transports []*memTransport
	changed    chan struct{} // capacity 1: a subscription changed
}

func (b *memBuilder) Build(server bootstrap.ServerConfig, _ *corev3.Node, h transport.Handler) (transport.Transport, error) {
	t := &memTransport{b: b, server: server, h: h, subs: make(map[string]map[string]bool)}
	b.mu.Lock()
	b.transports = append(b.transports, t)
	b.mu.Unlock()
	return t, nil
}

// waitSubscribed waits until, for each server_uri of want, a transport to
// that server has subscribed to every name listed, and returns those
// transports, in the order of want's sorted keys.
func (b *memBuilder) waitSubscribed(ctx context.Context, typeURL string, want map[string][]string) ([]*memTransport, error) {
	uris := slices.Sorted(maps.Keys(want))
	for {
		var found []*memTransport
		b.mu.Lock()
		for _, uri := range uris {
			for _, t := range b.transports {
				if t.server.ServerURI == uri && t.hasAll(typeURL, want[uri]) {
					found = append(found, t)
					break
				}
			}
		}
		b.mu.Unlock()
		if len(found) == len(uris) {
			return found, nil
		}
		select {
		case <-b.changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("the client did not subscribe to the resources: %w", ctx.Err())
		}
	}
}

// memTransport is a transport that carries nothing: it records the
// subscriptions, and judge hands its handler the response.
type memTransport struct {
	b      *memBuilder
	server bootstrap.ServerConfig
	h      transport.Handler
	mu     sync.Mutex
	subs   map[string]map[string]bool // type URL → names subscribed
}

func (t *memTransport) UpdateSubscriptions(typeURL string, add, remove []string) {
	t.mu.Lock()
	set := t.subs[typeURL]
	if set == nil {
		set = make(map[string]bool)
		t.subs[typeURL] = set
	}
	for _, n := range remove {
		delete(set, n)
	}
	for _, n := range add {
		set[n] = true
	}
	t.mu.Unlock()
	select {
	case t.b.changed <- struct{}{}:
	default:
	}
}

func (t *memTransport) hasAll(typeURL string, names []string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range names {
		if !t.subs[typeURL][n] {
			return false
		}
	}
	return true
}

func (t *memTransport) Close() {}
