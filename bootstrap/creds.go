package bootstrap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// TransportCredentials builds the gRPC transport credentials of the selected
// channel_creds entry once: plaintext for "insecure"; for "tls", a TLS
// client config whose roots come from CACertificateFile (the system roots
// when it is empty) and whose client certificate comes from CertificateFile
// and PrivateKeyFile when they are set, read now and not again. A
// "google_default" entry is an error: it needs per-call credentials too.
// ChannelCredentials is what a long-lived channel should use.
//
// Errors name the file that could not be used.
func (s ServerConfig) TransportCredentials() (credentials.TransportCredentials, error) {
	i := s.selectedCreds()
	if i < 0 {
		return nil, fmt.Errorf("bootstrap: server %q: channel_creds: %s", s.ServerURI, noSupportedCreds(s.ChannelCreds))
	}
	c := s.ChannelCreds[i]
	switch c.Type {
	case CredsInsecure:
		return insecure.NewCredentials(), nil
	case CredsGoogleDefault:
		return nil, fmt.Errorf("bootstrap: server %q: channel_creds[%d]: %s needs per-call credentials: use ChannelCredentials", s.ServerURI, i, c.Type)
	}
	cfg, _, err := s.tlsClientConfig(i)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// tlsClientConfig reads the "tls" entry i of s into a TLS client config.
func (s ServerConfig) tlsClientConfig(i int) (*tls.Config, TLSCreds, error) {
	path := index("channel_creds", i)
	t, err := s.ChannelCreds[i].tlsCreds(path)
	if err == nil {
		err = t.validate(member(path, "config"))
	}
	if err != nil {
		return nil, t, fmt.Errorf("bootstrap: server %q: %w", s.ServerURI, err)
	}
	cfg, err := t.clientConfig()
	if err != nil {
		return nil, t, fmt.Errorf("bootstrap: server %q: %w", s.ServerURI, err)
	}
	return cfg, t, nil
}

// ChannelCredentials are what a gRPC channel to a management server needs,
// made from the server's selected channel_creds entry by
// [ServerConfig.ChannelCredentials].
type ChannelCredentials struct {
	// Transport secures the connection (dial option
	// grpc.WithTransportCredentials).
	Transport credentials.TransportCredentials
	// PerRPC, when not nil, adds credentials to every call (dial option
	// grpc.WithPerRPCCredentials): google_default's OAuth tokens.
	PerRPC credentials.PerRPCCredentials
	// Call are the credentials of the server's call_creds (gRFC A97), each
	// added to every call as PerRPC is (one grpc.WithPerRPCCredentials
	// each): a "jwt_token_file" entry's bearer token.
	Call []credentials.PerRPCCredentials

	close func() // releases the file watcher of "tls"; nil if none
}

// Close releases what the credentials hold: the goroutine that re-reads
// the files of "tls" credentials. Call it once the channel that uses them
// is closed. It is safe on nil and idempotent.
func (c *ChannelCredentials) Close() {
	if c == nil || c.close == nil {
		return
	}
	c.close()
	c.close = nil
}

// ChannelCredentials builds the credentials of the selected channel_creds
// entry, for a channel that lives long:
//   - "insecure": plaintext.
//   - "tls" (gRFC A65): TLS with roots from ca_certificate_file (the
//     system's when unset) and, when set, the client certificate of
//     certificate_file and private_key_file. The files are read again every
//     refresh_interval (ten minutes by default), so a rotated certificate
//     is used by the next connection; files that are missing or hold no
//     usable certificate are an error now.
//   - "google_default" (gRFC A27): TLS, with OAuth tokens of Google's
//     application default credentials on every call. Where there are none
//     (no GOOGLE_APPLICATION_CREDENTIALS, no gcloud login, not on Google
//     Cloud) the error says so: this is where a Traffic Director bootstrap
//     used off Google Cloud fails, not when it is read.
//
// The call_creds of the server are in Call (see [ChannelCredentials.Call]);
// they are refused on an "insecure" channel.
//
// The result must be closed after the channel.
func (s ServerConfig) ChannelCredentials() (*ChannelCredentials, error) {
	call, err := s.callCreds()
	if err != nil {
		return nil, err
	}
	cc, err := s.channelCredentials()
	if err != nil {
		return nil, err
	}
	cc.Call = call
	return cc, nil
}

// channelCredentials builds the credentials of the selected channel_creds
// entry, as ChannelCredentials says.
func (s ServerConfig) channelCredentials() (*ChannelCredentials, error) {
	i := s.selectedCreds()
	if i < 0 {
		return nil, fmt.Errorf("bootstrap: server %q: channel_creds: %s", s.ServerURI, noSupportedCreds(s.ChannelCreds))
	}
	switch s.ChannelCreds[i].Type {
	case CredsInsecure:
		return &ChannelCredentials{Transport: insecure.NewCredentials()}, nil
	case CredsGoogleDefault:
		tc, rpc, err := googleDefaultCredentials(context.Background())
		if err != nil {
			return nil, fmt.Errorf("bootstrap: server %q: channel_creds[%d]: %s: %w", s.ServerURI, i, CredsGoogleDefault, err)
		}
		return &ChannelCredentials{Transport: tc, PerRPC: rpc}, nil
	}
	// Reading the files once now turns a bad file into an error here,
	// naming it, instead of handshakes that wait for a certificate the
	// file watcher never finds.
	cfg, t, err := s.tlsClientConfig(i)
	if err != nil {
		return nil, err
	}
	if t.CACertificateFile == "" && t.CertificateFile == "" {
		return &ChannelCredentials{Transport: credentials.NewTLS(cfg)}, nil // system roots, no file to watch
	}
	tc, closeFn, err := t.refreshingCredentials()
	if err != nil {
		return nil, fmt.Errorf("bootstrap: server %q: channel_creds[%d]: %w", s.ServerURI, i, err)
	}
	return &ChannelCredentials{Transport: tc, close: closeFn}, nil
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
		return fmt.Sprintf("must list at least one of %q, %q, %q", CredsInsecure, CredsTLS, CredsGoogleDefault)
	}
	types := make([]string, len(creds))
	for i, c := range creds {
		types[i] = c.Type
	}
	return fmt.Sprintf("no supported type in %q (supported: %q, %q, %q)", types, CredsInsecure, CredsTLS, CredsGoogleDefault)
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
	switch c := s.ChannelCreds[i]; c.Type {
	case CredsInsecure:
		return nil, nil
	case CredsGoogleDefault:
		return nil, fmt.Errorf("bootstrap: server %q: channel_creds[%d]: %s is for gRPC channels only", s.ServerURI, i, c.Type)
	}
	cfg, _, err := s.tlsClientConfig(i)
	return cfg, err
}
