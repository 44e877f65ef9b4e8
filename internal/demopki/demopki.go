// Package demopki is the throwaway certificate authority of goxds's
// example programs (example/mesh, example/httpmesh): a CA in a temporary
// directory and the SPIFFE certificates it issues there, for the
// bootstrap's file_watcher certificate providers to read. It is for
// demonstrations only: the keys are written unprotected, the
// certificates live an hour.
package demopki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/goxds/xds/testutils"
)

// PKI is a throwaway CA in a temporary directory, and the certificates it
// issues there.
type PKI struct {
	dir string
	// CAFile is the CA's certificate, PEM: a provider's
	// ca_certificate_file.
	CAFile string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// New makes a CA named name in a new temporary directory; Remove deletes
// it.
func New(name string) (*PKI, error) {
	dir, err := os.MkdirTemp("", "goxds-"+name+"-")
	if err != nil {
		return nil, err
	}
	p := &PKI{dir: dir}
	tmpl := &x509.Certificate{
		Subject: pkix.Name{CommonName: name + " demo CA"}, IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	der, key, err := p.sign(tmpl)
	if err != nil {
		return nil, err
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	p.caKey = key
	p.CAFile, err = p.write("ca.pem", "CERTIFICATE", der)
	return p, err
}

// Issue writes name.pem and name.key: a certificate whose only SAN is the
// SPIFFE ID id, for a server or (client) a client. Issuing a name again
// replaces its files atomically, as a rotation: a provider reading them
// meanwhile sees the old pair or the new one, never half of each.
func (p *PKI) Issue(name, id string, client bool) (certFile, keyFile string, err error) {
	u, err := url.Parse(id)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: name}, URIs: []*url.URL{u}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, key, err := p.sign(tmpl)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	if keyFile, err = p.write(name+".key", "PRIVATE KEY", keyDER); err != nil {
		return "", "", err
	}
	certFile, err = p.write(name+".pem", "CERTIFICATE", der)
	return certFile, keyFile, err
}

// sign signs tmpl with the CA, or with its own key while there is no CA.
func (p *PKI) sign(tmpl *x509.Certificate) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	parent, signer := tmpl, key
	if p.ca != nil {
		parent, signer = p.ca, p.caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	return der, key, err
}

func (p *PKI) write(name, blockType string, der []byte) (string, error) {
	path := filepath.Join(p.dir, name)
	// Atomically (a temporary file renamed over it): a demo may rotate
	// files while a provider reads them.
	return path, testutils.WriteFileAtomically(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}))
}

// Remove deletes the directory and everything issued in it.
func (p *PKI) Remove() { os.RemoveAll(p.dir) }
