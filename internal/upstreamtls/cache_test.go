package upstreamtls_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/internal/upstreamtls"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// rootsBootstrap is a bootstrap whose certificate provider "roots" reads
// the CA of a test PKI.
func rootsBootstrap(t *testing.T) *bootstrap.Config {
	t.Helper()
	pki := testutils.NewPKI(t)
	cfg, err := json.Marshal(map[string]string{"ca_certificate_file": pki.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	return &bootstrap.Config{CertificateProviders: map[string]bootstrap.CertificateProvider{
		"roots": {PluginName: "file_watcher", Config: cfg},
	}}
}

// usable reports whether a handshake with s's HandshakeInfo can start:
// one closed has released its providers, and has no roots to offer.
func usable(s *upstreamtls.Shared) error {
	_, err := s.Info.ClientTLSConfig(context.Background(), "", nil)
	return err
}

func TestCacheSharesOneHandshakeInfoPerSecurity(t *testing.T) {
	b := rootsBootstrap(t)
	var c upstreamtls.Cache
	defer c.Close()
	a1, err := c.Get(b, &resources.SecurityConfig{RootInstance: "roots", SNI: "a"})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := c.Get(b, &resources.SecurityConfig{RootInstance: "roots", SNI: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if a1 != a2 {
		t.Errorf("two equal security configs got two HandshakeInfos; want one shared")
	}
	other, err := c.Get(b, &resources.SecurityConfig{RootInstance: "roots", SNI: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if other == a1 || other.Key == a1.Key {
		t.Errorf("security configs with different SNIs share a HandshakeInfo (keys %q, %q)", a1.Key, other.Key)
	}
	if c.Len() != 2 {
		t.Errorf("Len = %d, want 2", c.Len())
	}
}

// Prune closes what nothing holds, and only that: a HandshakeInfo an
// endpoint still holds keeps its providers for the next handshake.
func TestCachePruneClosesOnlyWhatNothingHolds(t *testing.T) {
	b := rootsBootstrap(t)
	var c upstreamtls.Cache
	defer c.Close()
	held, err := c.Get(b, &resources.SecurityConfig{RootInstance: "roots", SNI: "held"})
	if err != nil {
		t.Fatal(err)
	}
	held.Hold()
	loose, err := c.Get(b, &resources.SecurityConfig{RootInstance: "roots", SNI: "loose"})
	if err != nil {
		t.Fatal(err)
	}
	c.Prune()
	if c.Len() != 1 {
		t.Fatalf("after Prune, Len = %d, want 1 (the held one)", c.Len())
	}
	if err := usable(held); err != nil {
		t.Errorf("a held HandshakeInfo was closed by Prune: %v", err)
	}
	if err := usable(loose); err == nil {
		t.Errorf("a HandshakeInfo nothing held survived Prune: its handshakes still start")
	}

	// Two holders: the first release keeps it, the second lets Prune close it.
	held.Hold()
	held.Release()
	c.Prune()
	if err := usable(held); err != nil {
		t.Errorf("a HandshakeInfo with a holder left was closed: %v", err)
	}
	held.Release()
	c.Prune()
	if c.Len() != 0 {
		t.Errorf("Len = %d after the last release and Prune, want 0", c.Len())
	}
	if err := usable(held); err == nil {
		t.Errorf("a HandshakeInfo released by all was not closed by Prune")
	}

	// The security comes back: a new HandshakeInfo, not the closed one.
	again, err := c.Get(b, &resources.SecurityConfig{RootInstance: "roots", SNI: "held"})
	if err != nil {
		t.Fatal(err)
	}
	if again == held {
		t.Fatal("Get returned the closed HandshakeInfo")
	}
	if err := usable(again); err != nil {
		t.Errorf("the rebuilt HandshakeInfo cannot start a handshake: %v", err)
	}
}

func TestCacheCloseClosesHeld(t *testing.T) {
	b := rootsBootstrap(t)
	var c upstreamtls.Cache
	s, err := c.Get(b, &resources.SecurityConfig{RootInstance: "roots"})
	if err != nil {
		t.Fatal(err)
	}
	s.Hold()
	c.Close()
	if c.Len() != 0 {
		t.Errorf("Len = %d after Close, want 0", c.Len())
	}
	if err := usable(s); err == nil {
		t.Error("a held HandshakeInfo survived Close")
	}
}

// A security whose provider the bootstrap lacks is an error that says
// so, and nothing is cached for it.
func TestCacheGetUnknownProvider(t *testing.T) {
	var c upstreamtls.Cache
	defer c.Close()
	_, err := c.Get(rootsBootstrap(t), &resources.SecurityConfig{RootInstance: "missing"})
	if !errors.Is(err, bootstrap.ErrUnknownCertificateProvider) {
		t.Fatalf("Get with an unknown instance: %v, want an error wrapping bootstrap.ErrUnknownCertificateProvider", err)
	}
	if c.Len() != 0 {
		t.Errorf("Len = %d after a failed Get, want 0", c.Len())
	}
	if _, err := c.Get(nil, &resources.SecurityConfig{RootInstance: "roots"}); !errors.Is(err, bootstrap.ErrUnknownCertificateProvider) {
		t.Errorf("Get with no bootstrap: %v, want an error wrapping bootstrap.ErrUnknownCertificateProvider", err)
	}
}
