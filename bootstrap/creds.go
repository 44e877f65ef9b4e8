package bootstrap

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// TransportCredentials builds the gRPC transport credentials of the selected
// channel_creds entry: plaintext for "insecure"; for "tls", a TLS client
// config whose roots come from CACertificateFile (the system roots when it is
// empty) and whose client certificate comes from CertificateFile and
// PrivateKeyFile when they are set.
//
// The files are read on every call, so calling it again picks up rotated
// files. Errors name the file that could not be used.
func (s ServerConfig) TransportCredentials() (credentials.TransportCredentials, error) {
	i := s.selectedCreds()
	if i < 0 {
		return nil, fmt.Errorf("bootstrap: server %q: channel_creds: %s", s.ServerURI, noSupportedCreds(s.ChannelCreds))
	}
	c := s.ChannelCreds[i]
	if c.Type == CredsInsecure {
		return insecure.NewCredentials(), nil
	}
	path := index("channel_creds", i)
	t, err := c.tlsCreds(path)
	if err == nil {
		err = t.validate(member(path, "config"))
	}
	if err != nil {
		return nil, fmt.Errorf("bootstrap: server %q: %w", s.ServerURI, err)
	}
	cfg, err := t.clientConfig()
	if err != nil {
		return nil, fmt.Errorf("bootstrap: server %q: %w", s.ServerURI, err)
	}
	return credentials.NewTLS(cfg), nil
}

// clientConfig reads the files of t into a TLS client config.
func (t TLSCreds) clientConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CACertificateFile != "" {
		pem, err := os.ReadFile(t.CACertificateFile)
		if err != nil {
			return nil, fmt.Errorf("ca_certificate_file: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_certificate_file: no PEM certificate found in %s", t.CACertificateFile)
		}
		cfg.RootCAs = roots
	}
	if t.CertificateFile != "" || t.PrivateKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertificateFile, t.PrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("certificate_file %s, private_key_file %s: %w", t.CertificateFile, t.PrivateKeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// validate checks the settings that do not need the files.
func (t TLSCreds) validate(path string) error {
	switch {
	case t.CertificateFile != "" && t.PrivateKeyFile == "":
		return fieldErrorf(member(path, "private_key_file"), "must be set when certificate_file is set")
	case t.CertificateFile == "" && t.PrivateKeyFile != "":
		return fieldErrorf(member(path, "certificate_file"), "must be set when private_key_file is set")
	case t.RefreshInterval < 0:
		return fieldErrorf(member(path, "refresh_interval"), "must not be negative, got %s", t.RefreshInterval)
	}
	return nil
}

// noSupportedCreds explains why no entry of creds could be selected.
func noSupportedCreds(creds []ChannelCreds) string {
	if len(creds) == 0 {
		return fmt.Sprintf("must list at least one of %q, %q", CredsInsecure, CredsTLS)
	}
	types := make([]string, len(creds))
	for i, c := range creds {
		types[i] = c.Type
	}
	return fmt.Sprintf("no supported type in %q (supported: %q, %q)", types, CredsInsecure, CredsTLS)
}

// TLSConfig builds the TLS client config of the selected channel_creds
// entry, for transports that are not gRPC (REST over https): nil for
// "insecure"; for "tls", what TransportCredentials would use. The files are
// read on every call.
func (s ServerConfig) TLSConfig() (*tls.Config, error) {
	i := s.selectedCreds()
	if i < 0 {
		return nil, fmt.Errorf("bootstrap: server %q: channel_creds: %s", s.ServerURI, noSupportedCreds(s.ChannelCreds))
	}
	c := s.ChannelCreds[i]
	if c.Type == CredsInsecure {
		return nil, nil
	}
	path := index("channel_creds", i)
	t, err := c.tlsCreds(path)
	if err == nil {
		err = t.validate(member(path, "config"))
	}
	if err == nil {
		var cfg *tls.Config
		if cfg, err = t.clientConfig(); err == nil {
			return cfg, nil
		}
	}
	return nil, fmt.Errorf("bootstrap: server %q: %w", s.ServerURI, err)
}
