package resources

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
)

// The fuzz targets feed arbitrary bytes to each decoder as the value of an
// Any of the right type. Decoding must never panic, and whatever decodes
// must satisfy the rules the decoder promises. Seed corpora live in
// testdata/fuzz/<target>/.

func FuzzDecodeListener(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		name, l, err := ListenerType.DecodeTyped(nil, &anypb.Any{TypeUrl: ListenerTypeURL, Value: b})
		if err != nil {
			return
		}
		if l.Server != nil {
			checkServerListener(t, l)
			return
		}
		if name == "" || name != l.Name || name != l.Raw.GetName() || l.HTTPConnectionManager == nil {
			t.Fatalf("name %q, value %q, raw %q", name, l.Name, l.Raw.GetName())
		}
		if (l.RouteConfigName == "") == (l.InlineRouteConfig == nil) {
			t.Fatalf("want exactly one of RouteConfigName %q and an inline route config", l.RouteConfigName)
		}
		if l.MaxStreamDuration < 0 {
			t.Fatalf("negative MaxStreamDuration %v", l.MaxStreamDuration)
		}
		n := len(l.HTTPFilters)
		if n == 0 || !anyIs(l.HTTPFilters[n-1].Config, routerName) {
			t.Fatalf("router is not the last filter: %+v", l.HTTPFilters)
		}
		seen := map[string]bool{}
		for i, f := range l.HTTPFilters {
			ft, ok := LookupHTTPFilter(f.TypeURL)
			if f.Name == "" || seen[f.Name] || !ok || !ft.ClientSide || ft.Terminal != (i == n-1) || f.Parsed == nil {
				t.Fatalf("bad filter %d: %+v", i, f)
			}
			seen[f.Name] = true
		}
		if l.InlineRouteConfig != nil {
			checkRouteConfig(t, l.InlineRouteConfig)
		}
	})
}

// checkServerListener holds a decoded server Listener to what the server
// relies on: some chain to serve, each with routes and a router last, and
// a table of entries, all distinct, each of a chain the Listener serves
// (dataplane/authz's FuzzFindFilterChain looks chains up in it).
func checkServerListener(t *testing.T, l *Listener) {
	s := l.Server
	if l.Name == "" || l.HTTPConnectionManager != nil || l.HTTPFilters != nil || (len(s.FilterChains) == 0 && s.DefaultFilterChain == nil) {
		t.Fatalf("bad server Listener %+v", l)
	}
	chains := s.FilterChains
	if s.DefaultFilterChain != nil {
		chains = append(chains[:len(chains):len(chains)], s.DefaultFilterChain)
	}
	for _, fc := range chains {
		if (fc.RouteConfigName == "") == (fc.InlineRouteConfig == nil) {
			t.Fatalf("chain %q: want exactly one of RouteConfigName and an inline route config", fc.Name)
		}
		n := len(fc.HTTPFilters)
		if n == 0 || !anyIs(fc.HTTPFilters[n-1].Config, routerName) {
			t.Fatalf("chain %q: router is not the last filter", fc.Name)
		}
		if (fc.TLS == nil) != (fc.Security == nil) || (fc.Security != nil && fc.Security.IdentityInstance == "") {
			t.Fatalf("chain %q: TLS %v, security %+v", fc.Name, fc.TLS, fc.Security)
		}
		if fc.InlineRouteConfig != nil {
			checkRouteConfig(t, fc.InlineRouteConfig)
		}
	}
	served := make(map[*FilterChain]bool, len(s.FilterChains)) // true once an entry names it
	for _, fc := range s.FilterChains {
		served[fc] = false
	}
	seen := make(map[FilterChainEntry]bool, len(s.Entries))
	for _, e := range s.Entries {
		key := e
		key.Chain = nil
		if _, ok := served[e.Chain]; !ok || seen[key] {
			t.Fatalf("entry %+v: of a chain not served, or a match twice", e)
		}
		seen[key], served[e.Chain] = true, true
	}
	for fc, named := range served {
		if !named {
			t.Fatalf("chain %q has no entry", fc.Name)
		}
	}
}

func FuzzDecodeRouteConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		name, rc, err := RouteConfigType.DecodeTyped(nil, &anypb.Any{TypeUrl: RouteConfigTypeURL, Value: b})
		if err != nil {
			return
		}
		if name == "" || name != rc.Name || name != rc.Raw().GetName() {
			t.Fatalf("name %q, value %q, raw %q", name, rc.Name, rc.Raw().GetName())
		}
		checkRouteConfig(t, rc)
		checkRouteConfigRaw(t, rc, b)
	})
}

// checkRouteConfigRaw asserts that the Raw of a route configuration
// decoded from b, and of each of its virtual hosts and kept routes, is
// the message b holds there: the sub-slices the values keep are found in
// the right places whatever else the bytes hold.
func checkRouteConfigRaw(t *testing.T, rc *RouteConfig, b []byte) {
	t.Helper()
	want := new(routev3.RouteConfiguration)
	if err := proto.Unmarshal(b, want); err != nil {
		t.Fatalf("decoded, yet does not unmarshal: %v", err)
	}
	if !proto.Equal(rc.Raw(), want) {
		t.Fatalf("RouteConfig.Raw() = %v, want %v", rc.Raw(), want)
	}
	for i, vh := range rc.VirtualHosts {
		wvh := want.GetVirtualHosts()[i]
		if !proto.Equal(vh.Raw(), wvh) {
			t.Fatalf("VirtualHosts[%d].Raw() = %v, want %v", i, vh.Raw(), wvh)
		}
		skipped := make(map[int]bool, len(vh.SkippedRoutes))
		for _, s := range vh.SkippedRoutes {
			skipped[s.Index] = true
		}
		k := 0
		for j, wr := range wvh.GetRoutes() {
			if skipped[j] {
				continue
			}
			if !proto.Equal(vh.Routes[k].Raw(), wr) {
				t.Fatalf("VirtualHosts[%d] route %d: Raw() = %v, want %v", i, j, vh.Routes[k].Raw(), wr)
			}
			k++
		}
	}
}

// checkRouteConfig asserts what a decoded route configuration promises, and
// runs the matchers, which must not panic either.
func checkRouteConfig(t *testing.T, rc *RouteConfig) {
	t.Helper()
	names := rc.ClusterNames()
	if !sort.StringsAreSorted(names) {
		t.Fatalf("ClusterNames not sorted: %v", names)
	}
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			t.Fatalf("ClusterNames has %q twice", names[i])
		}
	}
	for _, vh := range rc.VirtualHosts {
		if len(vh.Domains) == 0 {
			t.Fatal("virtual host without domains")
		}
		for _, d := range vh.Domains {
			if validateDomain(d) != nil {
				t.Fatalf("invalid domain %q accepted", d)
			}
			if kindOfDomain(d) == domainExact && FindVirtualHost([]*VirtualHost{vh}, d) != vh {
				t.Fatalf("exact domain %q does not find its own virtual host", d)
			}
		}
		checkOverrides(t, vh.FilterOverrides)
		for _, r := range vh.Routes {
			checkRoute(t, r)
		}
		// Every route received is either kept or skipped, in order.
		if n := len(vh.Raw().GetRoutes()); len(vh.Routes)+len(vh.SkippedRoutes) != n {
			t.Fatalf("%d routes kept and %d skipped of %d", len(vh.Routes), len(vh.SkippedRoutes), n)
		}
		for i, s := range vh.SkippedRoutes {
			if s.Reason == "" || (i > 0 && s.Index <= vh.SkippedRoutes[i-1].Index) {
				t.Fatalf("bad skipped route %d: %+v", i, s)
			}
		}
	}
	FindVirtualHost(rc.VirtualHosts, "Fuzz.Example.com:443")
}

// checkOverrides asserts that every parsed filter override has a value.
func checkOverrides(t *testing.T, m map[string]HTTPFilterConfig) {
	t.Helper()
	if m != nil && len(m) == 0 {
		t.Fatal("empty, non-nil FilterOverrides")
	}
	for name, c := range m {
		if c == nil {
			t.Fatalf("override %q is nil", name)
		}
	}
}

func checkRoute(t *testing.T, r *Route) {
	t.Helper()
	checkOverrides(t, r.FilterOverrides)
	if r.RuntimeFraction < -1 || r.RuntimeFraction > 1000000 {
		t.Fatalf("RuntimeFraction %d out of range", r.RuntimeFraction)
	}
	if r.PathMatch == PathMatchRegex && r.Regex == nil {
		t.Fatal("regex route without a regex")
	}
	r.MatchPath("/pkg.Service/Method")
	for _, h := range r.Headers {
		h.Match("value", true)
		h.Match("", false)
	}
	for _, q := range r.QueryParameters {
		q.Match("v", true)
	}
	if r.Action != RouteActionRoute {
		return
	}
	if len(r.ClusterNames()) == 0 {
		t.Fatal("forwarding route without clusters")
	}
	var sum uint64
	for _, wc := range r.WeightedClusters {
		if wc.Weight == 0 || wc.Name == "" {
			t.Fatalf("bad weighted cluster %+v", wc)
		}
		checkOverrides(t, wc.FilterOverrides)
		sum += uint64(wc.Weight)
	}
	if sum > math.MaxUint32 {
		t.Fatalf("weights sum to %d", sum)
	}
	for _, h := range r.HashPolicies {
		if h.Kind == HashPolicyHeader && h.HeaderName == "" {
			t.Fatal("header hash policy without a header")
		}
	}
	if (r.Timeout != nil && *r.Timeout < 0) || (r.MaxStreamDuration != nil && *r.MaxStreamDuration < 0) ||
		(r.GRPCTimeoutHeaderMax != nil && *r.GRPCTimeoutHeaderMax < 0) {
		t.Fatal("negative route duration")
	}
}

func FuzzDecodeCluster(f *testing.F) {
	// gRFC A105's per-host thresholds are read only with the variable set.
	f.Setenv(EnvConnectionScaling, "true")
	f.Fuzz(func(t *testing.T, b []byte) {
		name, c, err := ClusterType.DecodeTyped(nil, &anypb.Any{TypeUrl: ClusterTypeURL, Value: b})
		if err != nil {
			return
		}
		if name == "" || name != c.Name || name != c.Raw().GetName() {
			t.Fatalf("name %q, value %q, raw %q", name, c.Name, c.Raw().GetName())
		}
		switch c.Kind {
		case ClusterKindEDS:
			if c.EDSServiceName() == "" {
				t.Fatal("EDS cluster without a service name")
			}
		case ClusterKindLogicalDNS:
			if c.DNSHost == "" || c.DNSPort == 0 || c.DNSPort > 65535 {
				t.Fatalf("LOGICAL_DNS cluster with %q:%d", c.DNSHost, c.DNSPort)
			}
		case ClusterKindAggregate:
			if len(c.AggregateChildren) == 0 {
				t.Fatal("aggregate cluster without children")
			}
		default:
			t.Fatalf("unknown kind %v", c.Kind)
		}
		switch p := c.LBPolicy; p.Kind {
		case LBRingHash:
			if p.MinRingSize > p.MaxRingSize || p.MaxRingSize > MaxRingSizeLimit {
				t.Fatalf("ring sizes %d..%d", p.MinRingSize, p.MaxRingSize)
			}
		case LBLeastRequest:
			if p.ChoiceCount < 2 || p.ChoiceCount > MaxChoiceCount {
				t.Fatalf("choice count %d", p.ChoiceCount)
			}
		case LBWeightedRoundRobin:
			if p.WRR.ErrorUtilizationPenalty < 0 || p.WRR.WeightUpdatePeriod < 100*time.Millisecond {
				t.Fatalf("weighted round robin %+v", p.WRR)
			}
		}
		if p := c.LBPolicy; p.Kind == LBRingHash && p.MinRingSize == 0 {
			t.Fatal("ring of minimum size 0")
		}
		if n, want := c.MaxConnectionsPerHost, firstPerHostMax(c.Raw()); n != want {
			t.Fatalf("MaxConnectionsPerHost %d, want %d (the first DEFAULT per-host threshold's)", n, want)
		}
		checkClusterInContext(t, b, c)
	})
}

// firstPerHostMax is the max_connections of m's first per-host threshold
// of priority DEFAULT, 0 if unset.
func firstPerHostMax(m *clusterv3.Cluster) uint32 {
	for _, t := range m.GetCircuitBreakers().GetPerHostThresholds() {
		if t.GetPriority() == corev3.RoutingPriority_DEFAULT {
			return t.GetMaxConnections().GetValue()
		}
	}
	return 0
}

// fuzzContext is a server and a bootstrap defining the instance "roots",
// for decoding in a context.
var fuzzContext = &DecodeContext{
	Server:    &bootstrap.ServerConfig{ServerURI: "xds.example.com:443"},
	Bootstrap: bootstrapWith("roots"),
}

// checkClusterInContext decodes b, which decodes without a context into
// c, in fuzzContext: a context only adds rules (the instances named must
// be defined), and lrs_server "self" then names the context's server.
func checkClusterInContext(t *testing.T, b []byte, c *Cluster) {
	t.Helper()
	_, cc, err := ClusterType.DecodeTyped(fuzzContext, &anypb.Any{TypeUrl: ClusterTypeURL, Value: b})
	if sc := c.Security; err == nil && sc != nil {
		for _, n := range []string{sc.IdentityInstance, sc.RootInstance} {
			if n != "" && n != "roots" {
				t.Fatalf("accepted in a context without instance %q", n)
			}
		}
	}
	if err != nil {
		if c.Security == nil {
			t.Fatalf("without security, rejected in a context only: %v", err)
		}
		return
	}
	if want := c.LRSServerSelf; (cc.LRSServer == fuzzContext.Server) != want || c.LRSServer != nil {
		t.Fatalf("LRSServerSelf %v: LRSServer %v in a context, %v without", want, cc.LRSServer, c.LRSServer)
	}
}

func FuzzDecodeEndpoints(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		name, e, err := EndpointsType.DecodeTyped(nil, &anypb.Any{TypeUrl: EndpointsTypeURL, Value: b})
		if err != nil {
			return
		}
		if name == "" || name != e.Name || name != e.Raw().GetClusterName() {
			t.Fatalf("name %q, value %q, raw %q", name, e.Name, e.Raw().GetClusterName())
		}
		addrs := map[string]bool{}
		prios := map[uint32]bool{}
		for _, l := range e.Localities {
			if l.Weight == 0 {
				t.Fatal("locality of weight 0 kept")
			}
			prios[l.Priority] = true
			for _, ep := range l.Endpoints {
				if ep.Weight == 0 || len(ep.Addresses) == 0 {
					t.Fatalf("bad endpoint %+v", ep)
				}
				for _, a := range ep.Addresses {
					if addrs[a] {
						t.Fatalf("address %s twice", a)
					}
					addrs[a] = true
					if _, _, err := net.SplitHostPort(a); err != nil {
						t.Fatalf("address %q: %v", a, err)
					}
				}
			}
		}
		for p := range prios {
			if p >= uint32(len(prios)) {
				t.Fatalf("priorities %v have a gap", prios)
			}
		}
		for _, d := range e.Drops {
			if d.PerMillion > 1000000 || d.Category == "" {
				t.Fatalf("bad drop %+v", d)
			}
		}
	})
}

func FuzzUnwrap(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := Unwrap(&anypb.Any{TypeUrl: WrapperTypeURL, Value: b})
		if err != nil {
			return
		}
		if !env.Wrapped {
			t.Fatal("a wrapper came out unwrapped")
		}
		if env.HasTTL != (env.TTL > 0) {
			t.Fatalf("HasTTL %v with TTL %v", env.HasTTL, env.TTL)
		}
		if env.IsHeartbeat() != (env.Body == nil) {
			t.Fatal("IsHeartbeat disagrees with Body")
		}
		if env.Body == nil {
			return
		}
		if env.Body.GetTypeUrl() == WrapperTypeURL {
			t.Fatal("nested wrapper accepted")
		}
		if typ, ok := Lookup(env.Body.GetTypeUrl()); ok {
			name, v, err := typ.Decode(nil, env.Body)
			if err == nil && name != v.ResourceName() {
				t.Fatalf("decoded name %q, value name %q", name, v.ResourceName())
			}
		}
	})
}

// TestSeedCorporaDecode keeps the checked-in seeds valid resources, so the
// fuzzers start from inputs that reach past the first error.
func TestSeedCorporaDecode(t *testing.T) {
	decoders := map[string]func(b []byte) error{
		"FuzzDecodeListener":    func(b []byte) error { return decodeErr(ListenerType, ListenerTypeURL, b) },
		"FuzzDecodeRouteConfig": func(b []byte) error { return decodeErr(RouteConfigType, RouteConfigTypeURL, b) },
		"FuzzDecodeCluster":     func(b []byte) error { return decodeErr(ClusterType, ClusterTypeURL, b) },
		"FuzzDecodeEndpoints":   func(b []byte) error { return decodeErr(EndpointsType, EndpointsTypeURL, b) },
		"FuzzUnwrap": func(b []byte) error {
			env, err := Unwrap(&anypb.Any{TypeUrl: WrapperTypeURL, Value: b})
			if err != nil || env.Body == nil {
				return err
			}
			typ, ok := Lookup(env.Body.GetTypeUrl())
			if !ok {
				return fmt.Errorf("no type for %s", env.Body.GetTypeUrl())
			}
			_, _, err = typ.Decode(nil, env.Body)
			return err
		},
	}
	for target, decode := range decoders {
		files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
		if err != nil {
			t.Fatal(err)
		}
		seeds := 0
		for _, file := range files {
			b, err := readSeed(file)
			if err != nil {
				t.Errorf("%s: %v", file, err)
				continue
			}
			if isHex(filepath.Base(file)) {
				// A crasher kept by the fuzzer: it need not be valid,
				// only not panic, which running the target checks.
				continue
			}
			seeds++
			if err := decode(b); err != nil {
				t.Errorf("%s: %v", file, err)
			}
		}
		if seeds < 3 {
			t.Errorf("%s: %d named seeds, want at least 3", target, seeds)
		}
	}
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}

func decodeErr[T Resource](typ *Type[T], url string, b []byte) error {
	_, _, err := typ.DecodeTyped(nil, &anypb.Any{TypeUrl: url, Value: b})
	return err
}

// readSeed reads a corpus file holding one []byte value.
func readSeed(file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	header, rest, _ := strings.Cut(string(data), "\n")
	lit, ok := strings.CutPrefix(strings.TrimSpace(rest), "[]byte(")
	if header != "go test fuzz v1" || !ok || !strings.HasSuffix(lit, ")") {
		return nil, errors.New("not a one-[]byte corpus file")
	}
	s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	return []byte(s), err
}
