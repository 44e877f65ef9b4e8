package resources_test

import (
	"errors"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/goxds/xds/resources"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Secret is a validated SDS resource: the Go value of a custom type.
type Secret struct {
	Name string
	// CertificateChain is the PEM chain of a TLS certificate secret.
	CertificateChain []byte
	Raw              *tlsv3.Secret
}

// ResourceName and Proto make *Secret a resources.Resource.
func (s *Secret) ResourceName() string { return s.Name }
func (s *Secret) Proto() proto.Message { return s.Raw }

// SecretType is the type a client uses to watch secrets.
var SecretType = resources.NewType(resources.TypeOptions[*Secret]{
	TypeURL: resources.SecretTypeURL,
	Decode:  decodeSecret,
})

// decodeSecret accepts only TLS certificate secrets with a certificate
// chain given inline. It returns the name as soon as it knows it, so that
// a failure is reported against the right resource.
func decodeSecret(body *anypb.Any) (string, *Secret, error) {
	m := new(tlsv3.Secret)
	if err := proto.Unmarshal(body.GetValue(), m); err != nil {
		return "", nil, fmt.Errorf("unmarshal Secret: %v", err)
	}
	if m.GetName() == "" {
		return "", nil, errors.New("name: must not be empty")
	}
	chain := m.GetTlsCertificate().GetCertificateChain().GetInlineBytes()
	if len(chain) == 0 {
		return m.GetName(), nil, errors.New("tls_certificate.certificate_chain: want inline_bytes")
	}
	return m.GetName(), &Secret{Name: m.GetName(), CertificateChain: chain, Raw: m}, nil
}

// Register the type before creating clients; an init function is the usual
// place. Register refuses a second type for the same URL.
func init() {
	if err := resources.Register(SecretType); err != nil {
		panic(err)
	}
}

// A client finds the type by its URL and decodes what the server sent.
func Example_customType() {
	good, _ := anypb.New(&tlsv3.Secret{
		Name: "server-cert",
		Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("-----BEGIN CERTIFICATE-----")}},
		}},
	})
	bad, _ := anypb.New(&tlsv3.Secret{Name: "empty"})

	typ, ok := resources.Lookup(good.GetTypeUrl())
	fmt.Println("registered:", ok, typ.TypeName())

	name, v, err := typ.Decode(good)
	fmt.Println(name, len(v.(*Secret).CertificateChain), err)

	// The typed form skips the type assertion.
	name, _, err = SecretType.DecodeTyped(bad)
	fmt.Println(name, err)
	// Output:
	// registered: true Secret
	// server-cert 27 <nil>
	// empty Secret "empty": tls_certificate.certificate_chain: want inline_bytes
}
