package grpcxds_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

// newSPIFFEEnv is newSecureEnv whose "roots" provider is a file_watcher
// naming a SPIFFE trust bundle map (gRFC A87) of domains, and also a CA
// file of a PKI that trusts none of the tests' servers, which the gRFC
// says is then ignored. "id" is the mesh's client certificate.
func newSPIFFEEnv(t *testing.T, m *mesh, domains map[string]*testutils.PKI) *env {
	t.Helper()
	bundles, err := testutils.WriteSPIFFEBundleMap(t.TempDir(), "bundles.json", domains)
	if err != nil {
		t.Fatal(err)
	}
	return newSPIFFEEnvFile(t, m, bundles)
}

// newSPIFFEEnvFile is newSPIFFEEnv with the map at path bundles.
func newSPIFFEEnvFile(t *testing.T, m *mesh, bundles string) *env {
	t.Helper()
	roots, err := json.Marshal(map[string]string{"spiffe_trust_bundle_map_file": bundles, "ca_certificate_file": testutils.NewPKI(t).CAFile})
	if err != nil {
		t.Fatal(err)
	}
	return newSecureEnvProviders(t, m, 2*time.Second, map[string]bootstrap.CertificateProvider{"roots": {PluginName: "file_watcher", Config: roots}})
}

// gRFC A87 on a goxds channel, against go-control-plane's server: a
// cluster whose UpstreamTlsContext takes its roots from a provider of a
// SPIFFE trust bundle map verifies the server against the bundle of its
// SPIFFE ID's trust domain (the provider's CA file ignored), and the
// cluster's SAN matchers still apply; a server whose trust domain the map
// lacks, or whose SANs the matchers refuse, fails the handshake and the
// RPCs with UNAVAILABLE, the error saying why. Nothing is ever sent in
// plaintext.
func TestClusterTLSWithSPIFFEBundleMap(t *testing.T) {
	t.Parallel()
	m := newMesh(t) // the server's SPIFFE ID is in trust domain goxds.test
	for _, tc := range []struct {
		name    string
		domains map[string]*testutils.PKI
		san     string
		wantErr string // "": the RPCs succeed
	}{
		{name: "trusted domain", domains: map[string]*testutils.PKI{"goxds.test": m.pki, "other.goxds.test": testutils.NewPKI(t)}, san: serverSPIFFE},
		{name: "domain not in the map", domains: map[string]*testutils.PKI{"other.goxds.test": m.pki}, san: serverSPIFFE,
			wantErr: `trust domain "goxds.test", which the SPIFFE trust bundle map lacks`},
		{name: "domain of another CA", domains: map[string]*testutils.PKI{"goxds.test": testutils.NewPKI(t)}, san: serverSPIFFE,
			wantErr: "certificate signed by unknown authority"},
		{name: "SAN refused", domains: map[string]*testutils.PKI{"goxds.test": m.pki}, san: "spiffe://goxds.test/ns/default/sa/other",
			wantErr: "spiffe://goxds.test/ns/default/sa/other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newSPIFFEEnv(t, m, tc.domains)
			a := startTLSBackend(t, "a", m, 0)
			e.update(tree(routes(toCluster(prefix("/"), "A")),
				[]*clusterv3.Cluster{secureCluster(t, "A", "id", "roots", exactSAN(tc.san))}, eds("A", a.backend)))
			conn := e.dial(xdsCreds(t))
			if tc.wantErr == "" {
				e.waitServed(conn, 1, func(string) bool { return true })
				a.waitSerial(e.ctx, t, m.client.Serial)
			} else {
				err := e.waitFailing(conn)
				if status.Code(err) != codes.Unavailable || !strings.Contains(strings.ReplaceAll(err.Error(), `\"`, `"`), tc.wantErr) {
					t.Errorf("RPC error = %v, want UNAVAILABLE containing %q", err, tc.wantErr)
				}
			}
			if p := a.plaintext.Load(); p != 0 {
				t.Errorf("the server saw %d plaintext connections", p)
			}
		})
	}
}

// gRFC A87: a map that cannot be read when the provider starts leaves it
// with no map, and new connections fail their handshake: the cluster's
// RPCs fail with UNAVAILABLE, and nothing is sent in plaintext.
func TestClusterTLSWithUnreadableSPIFFEBundleMap(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	e := newSPIFFEEnvFile(t, m, filepath.Join(t.TempDir(), "missing.json"))
	a := startTLSBackend(t, "a", m, 0)
	e.update(tree(routes(toCluster(prefix("/"), "A")),
		[]*clusterv3.Cluster{secureCluster(t, "A", "id", "roots", exactSAN(serverSPIFFE))}, eds("A", a.backend)))
	err := e.waitFailing(e.dial(xdsCreds(t)))
	if status.Code(err) != codes.Unavailable {
		t.Errorf("RPC error = %v, want UNAVAILABLE", err)
	}
	t.Logf("RPC error: %v", err)
	if p := a.plaintext.Load(); p != 0 {
		t.Errorf("the server saw %d plaintext connections", p)
	}
}
