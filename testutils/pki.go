package testutils

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throw-away certificate authority for tests of TLS and mTLS: it
// issues certificates with the SANs a test needs and writes them as PEM
// files in a temporary directory, where a file_watcher certificate
// provider or "tls" channel creds can read them.
type PKI struct {
	// Dir holds the files.
	Dir string
	// CAFile is the CA certificate, PEM.
	CAFile string
	// Roots trusts the CA.
	Roots *x509.CertPool

	t     testing.TB
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// Cert is a certificate issued by a PKI.
type Cert struct {
	// CertFile and KeyFile are the PEM certificate and its PKCS#8 key.
	CertFile, KeyFile string
	// TLS is the same pair, for a server built in the test.
	TLS tls.Certificate
	// Serial is the certificate's serial number, to recognise it.
	Serial *big.Int
}

// CertOptions says what a certificate is for and what names it has.
type CertOptions struct {
	// DNSNames and URIs become the certificate's SANs; URIs may be SPIFFE
	// IDs ("spiffe://trust-domain/path").
	DNSNames []string
	URIs     []string
	// IPAddresses become IP SANs, for a server dialled by address
	// ("127.0.0.1:port").
	IPAddresses []net.IP
	// Client makes a client certificate (ExtKeyUsageClientAuth) instead of
	// a server one.
	Client bool
}

// NewPKI makes a CA and writes it to a new temporary directory of t.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{t: t, Dir: t.TempDir(), Roots: x509.NewCertPool()}
	var der []byte
	p.caKey, der = p.sign(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "goxds test CA"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	})
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p.ca = ca
	p.Roots.AddCert(ca)
	p.CAFile = p.write("ca.pem", "CERTIFICATE", der)
	return p
}

// Issue signs a new certificate and writes it as name.pem and name.key,
// replacing files of that name atomically (so that a watcher never reads
// half a file): issuing again under the same name is a rotation.
func (p *PKI) Issue(name string, o CertOptions) Cert {
	p.t.Helper()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: name}, DNSNames: o.DNSNames, IPAddresses: o.IPAddresses}
	for _, u := range o.URIs {
		parsed, err := url.Parse(u)
		if err != nil {
			p.t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if o.Client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	key, der := p.sign(tmpl)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	// The key first: a watcher that reads the pair between the two writes
	// gets a mismatched pair, which pemfile refuses and retries, rather
	// than an old key with the new certificate accepted by accident.
	c := Cert{KeyFile: p.write(name+".key", "PRIVATE KEY", keyDER)}
	c.CertFile = p.write(name+".pem", "CERTIFICATE", der)
	c.TLS = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	c.Serial = tmpl.SerialNumber
	return c
}

// sign makes a key and a certificate of tmpl, signed by the CA (or by
// itself while there is no CA yet).
func (p *PKI) sign(tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte) {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, big.NewInt(1<<62)); err != nil {
		p.t.Fatal(err)
	}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	parent, parentKey := p.ca, p.caKey
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		p.t.Fatal(err)
	}
	return key, der
}

func (p *PKI) write(name, blockType string, der []byte) string {
	p.t.Helper()
	path := filepath.Join(p.Dir, name)
	if err := WriteFileAtomically(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})); err != nil {
		p.t.Fatal(err)
	}
	return path
}
