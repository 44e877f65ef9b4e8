package spiffe

import (
	"crypto/x509"
	"strings"
	"testing"

	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
)

// TestVerifyChainBadInput: what a peer sends that is not a certificate is
// an error naming the peer, never a panic, with or without a map.
func TestVerifyChainBadInput(t *testing.T) {
	empty := map[string]*spiffebundle.Bundle{}
	for _, bundles := range []map[string]*spiffebundle.Bundle{nil, empty} {
		if _, err := VerifyChain(nil, x509.NewCertPool(), bundles, x509.ExtKeyUsageClientAuth, "client"); err == nil || err.Error() != "client sent no certificate" {
			t.Errorf("no certificate: %v", err)
		}
		if _, err := VerifyChain([][]byte{[]byte("garbage")}, x509.NewCertPool(), bundles, x509.ExtKeyUsageServerAuth, "server"); err == nil ||
			!strings.HasPrefix(err.Error(), "server certificate 0: ") {
			t.Errorf("garbage: %v", err)
		}
	}
}

// FuzzVerifyChain feeds VerifyChain a chain of arbitrary bytes: it must
// not panic and must not accept them. Seeds: testdata/fuzz/FuzzVerifyChain.
func FuzzVerifyChain(f *testing.F) {
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x01}, []byte(nil))
	f.Fuzz(func(t *testing.T, leaf, intermediate []byte) {
		raw := [][]byte{leaf}
		if intermediate != nil {
			raw = append(raw, intermediate)
		}
		for _, bundles := range []map[string]*spiffebundle.Bundle{nil, {}} {
			if _, err := VerifyChain(raw, x509.NewCertPool(), bundles, x509.ExtKeyUsageServerAuth, "server"); err == nil {
				t.Fatalf("VerifyChain accepted %x with no roots", raw)
			}
		}
	})
}
