package bootstrap

import (
	"encoding/json"
	"fmt"
	"strconv"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/jwt"
)

// CallCredsJWTTokenFile is the call credential type of gRFC A97: a JWT read
// from a file, sent as "authorization: Bearer <token>" on each stream to
// the management server, and read again as it nears its expiry so that a
// rotated token is used without a restart.
const CallCredsJWTTokenFile = "jwt_token_file"

// CallCreds is one entry of a server's call_creds list (gRFC A97). Unlike
// channel_creds, every entry of a supported type is used, and entries of
// other types are kept and ignored.
type CallCreds struct {
	// Type names the kind of credentials: CallCredsJWTTokenFile, or a type
	// this package does not support, which is ignored. JSON: type.
	Type string
	// Config is the entry's config as written in the JSON, compacted, or nil
	// if it had none. For a "jwt_token_file" entry it is read only when JWT
	// is nil.
	Config json.RawMessage
	// JWT is the decoded config of a "jwt_token_file" entry. Parse fills it;
	// when nil, Config is decoded instead.
	JWT *JWTCallCreds
}

// JWTCallCreds is the config of a "jwt_token_file" call_creds entry.
type JWTCallCreds struct {
	// TokenFile is the path of the file holding the JWT. The token must
	// carry an "exp" claim: it is cached until 30 s before then, and the
	// file is read again from a minute before that. Required. JSON:
	// jwt_token_file.
	TokenFile string
}

// supportedCallCreds reports whether this package builds credentials for
// the call_creds type t.
func supportedCallCreds(t string) bool { return t == CallCredsJWTTokenFile }

// decodeCallCredsList decodes call_creds: every entry keeps its type and
// raw config, and the config of each supported entry is decoded now, since
// all of them will be used (gRFC A97: a bad config of a supported type
// makes the bootstrap invalid).
func decodeCallCredsList(raw json.RawMessage, path string) ([]CallCreds, error) {
	typed, err := decodeTypedList(raw, path)
	if err != nil {
		return nil, err
	}
	creds := make([]CallCreds, len(typed))
	for i, t := range typed {
		creds[i].Type, creds[i].Config = t.typ, t.config
		if creds[i].Type == CallCredsJWTTokenFile {
			if creds[i].JWT, err = decodeJWTCallCreds(creds[i].Config, member(index(path, i), "config")); err != nil {
				return nil, err
			}
		}
	}
	return creds, nil
}

// decodeJWTCallCreds decodes the config of a "jwt_token_file" entry, which
// must name the token file.
func decodeJWTCallCreds(raw json.RawMessage, path string) (*JWTCallCreds, error) {
	if len(raw) == 0 || kindOf(raw) == "null" {
		return nil, fieldErrorf(path, "required for %q (it names the token file in %q)", CallCredsJWTTokenFile, "jwt_token_file")
	}
	o, err := asObject(raw, path)
	if err != nil {
		return nil, err
	}
	j := &JWTCallCreds{}
	if j.TokenFile, err = o.str("jwt_token_file", member(path, "jwt_token_file")); err != nil {
		return nil, err
	}
	if err := j.validate(path); err != nil {
		return nil, err
	}
	return j, nil
}

func (j JWTCallCreds) validate(path string) error {
	if j.TokenFile == "" {
		return fieldErrorf(member(path, "jwt_token_file"), "must name the token file")
	}
	return nil
}

// jwtCreds returns the settings of a "jwt_token_file" entry: JWT when set,
// otherwise Config decoded. path locates the entry in errors.
func (c CallCreds) jwtCreds(path string) (JWTCallCreds, error) {
	if c.JWT != nil {
		return *c.JWT, c.JWT.validate(member(path, "config"))
	}
	j, err := decodeJWTCallCreds(c.Config, member(path, "config"))
	if err != nil {
		return JWTCallCreds{}, err
	}
	return *j, nil
}

// validateCallCreds checks the call_creds of s: each supported entry's
// config, and that the channel they would travel on is secure. A token
// sent in plaintext could be read and replayed by anyone on the path,
// which is why gRPC refuses to send such credentials on an insecure
// connection; goxds says so when the bootstrap is read instead of failing
// every stream. A FILESYSTEM server ignores them, as it does channel_creds.
func (s ServerConfig) validateCallCreds(path string) error {
	if s.APIType == APITypeFilesystem {
		return nil
	}
	credsPath := member(path, "call_creds")
	for i, c := range s.CallCreds {
		if !supportedCallCreds(c.Type) {
			continue
		}
		entry := index(credsPath, i)
		if _, err := c.jwtCreds(entry); err != nil {
			return err
		}
		if s.APIType == APITypeREST {
			return fieldErrorf(entry, "%q call credentials are sent on gRPC streams only, and api_type is REST", c.Type)
		}
		if ci := s.selectedCreds(); ci >= 0 && s.ChannelCreds[ci].Type == CredsInsecure {
			return fieldErrorf(entry, "%q call credentials need a secure channel, and the selected channel_creds[%d] is %q: use %q (or %q)",
				c.Type, ci, CredsInsecure, CredsTLS, CredsGoogleDefault)
		}
	}
	return nil
}

// callCreds builds the per-call credentials of every supported call_creds
// entry of s, in order.
func (s ServerConfig) callCreds() ([]credentials.PerRPCCredentials, error) {
	if s.APIType == APITypeFilesystem {
		return nil, nil
	}
	if err := s.validateCallCreds(""); err != nil {
		return nil, fmt.Errorf("bootstrap: server %q: %w", s.ServerURI, err)
	}
	var out []credentials.PerRPCCredentials
	for i, c := range s.CallCreds {
		if !supportedCallCreds(c.Type) {
			continue
		}
		entry := index("call_creds", i)
		j, err := c.jwtCreds(entry)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: server %q: %w", s.ServerURI, err)
		}
		// grpc-go's public implementation of gRFC A97: the token is read
		// on the first call, cached until 30 s before its "exp", re-read
		// in the background from a minute before that, and a failed read
		// is retried with backoff, only when a call needs it.
		rpc, err := jwt.NewTokenFileCallCredentials(j.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: server %q: %s: %w", s.ServerURI, member(entry, "config.jwt_token_file"), err)
		}
		out = append(out, rpc)
	}
	return out, nil
}

// callCredsKey describes the supported call_creds of s for Key: two
// servers with different tokens must not share a connection.
func (s ServerConfig) callCredsKey() []string {
	if s.APIType == APITypeFilesystem {
		return nil
	}
	var parts []string
	for _, c := range s.CallCreds {
		if !supportedCallCreds(c.Type) {
			continue
		}
		j, err := c.jwtCreds("")
		if err != nil {
			parts = append(parts, "call:"+c.Type, "invalid", strconv.Quote(string(compact(c.Config))))
			continue
		}
		parts = append(parts, "call:"+c.Type, strconv.Quote(j.TokenFile))
	}
	return parts
}

// callCredsTypes lists the supported call_creds types of s, for String.
func (s ServerConfig) callCredsTypes() []string {
	var out []string
	for _, c := range s.CallCreds {
		if supportedCallCreds(c.Type) {
			out = append(out, c.Type)
		}
	}
	return out
}
