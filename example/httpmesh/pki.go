package main

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

// pki is a throwaway CA in a temporary directory, and the certificates it
// issues there, for the file_watcher certificate providers to read.
type pki struct {
	dir    string
	caFile string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

func newPKI() (*pki, error) {
	dir, err := os.MkdirTemp("", "goxds-httpmesh-")
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	tmpl := &x509.Certificate{
		Subject: pkix.Name{CommonName: "httpmesh demo CA"}, IsCA: true,
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
	p.caFile, err = p.write("ca.pem", "CERTIFICATE", der)
	return p, err
}

// issue writes name.pem and name.key: a certificate whose only SAN is the
// SPIFFE ID id, for a server or (client) a client.
func (p *pki) issue(name, id string, client bool) (certFile, keyFile string, err error) {
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
func (p *pki) sign(tmpl *x509.Certificate) ([]byte, *ecdsa.PrivateKey, error) {
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

func (p *pki) write(name, blockType string, der []byte) (string, error) {
	path := filepath.Join(p.dir, name)
	// Atomically (a temporary file renamed over it): the demo rewrites
	// the frontend's files while its provider may be reading them.
	return path, testutils.WriteFileAtomically(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}))
}

func (p *pki) remove() { os.RemoveAll(p.dir) }
