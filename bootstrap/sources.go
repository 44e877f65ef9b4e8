package bootstrap

import (
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Defaults of the REST and FILESYSTEM settings of a server.
const (
	// DefaultRefreshDelay is RefreshDelay when unset: the pause after a
	// REST answer that changed nothing, and the polling period of files
	// when the file system cannot report changes.
	DefaultRefreshDelay = time.Second
	// DefaultRequestTimeout is RequestTimeout when unset. A long-polling
	// server must answer (HTTP 304 is fine) within it.
	DefaultRequestTimeout = time.Minute
)

// APITypeFor returns the API type spoken for resources of typeURL: the
// entry of APITypePerType for it, else APIType.
func (s ServerConfig) APITypeFor(typeURL string) APIType {
	if t, ok := s.APITypePerType[typeURL]; ok {
		return t
	}
	return s.APIType
}

// FileDir returns the directory of an APITypeFilesystem server: ServerURI,
// without its "file://" scheme if it has one.
func (s ServerConfig) FileDir() string {
	if rest, ok := strings.CutPrefix(s.ServerURI, "file://"); ok {
		return filepath.FromSlash(rest)
	}
	return s.ServerURI
}

// FilePath returns the file an APITypeFilesystem server reads resources
// of typeURL from, resolved against FileDir; ok is false if ResourceFiles
// names none.
func (s ServerConfig) FilePath(typeURL string) (path string, ok bool) {
	p, ok := s.ResourceFiles[typeURL]
	if !ok {
		return "", false
	}
	p = filepath.FromSlash(p)
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.FileDir(), p)
	}
	return p, true
}

// EffectiveRefreshDelay is RefreshDelay, or DefaultRefreshDelay if unset.
func (s ServerConfig) EffectiveRefreshDelay() time.Duration {
	if s.RefreshDelay > 0 {
		return s.RefreshDelay
	}
	return DefaultRefreshDelay
}

// EffectiveRequestTimeout is RequestTimeout, or DefaultRequestTimeout if
// unset.
func (s ServerConfig) EffectiveRequestTimeout() time.Duration {
	if s.RequestTimeout > 0 {
		return s.RequestTimeout
	}
	return DefaultRequestTimeout
}

// decodeSourceFields reads the goxds fields that configure the API types:
// api_type_per_type, resource_files, refresh_delay and request_timeout.
func decodeSourceFields(o object, path string, s *ServerConfig) error {
	if raw, ok := o.get("api_type_per_type"); ok {
		p := member(path, "api_type_per_type")
		m, err := asObject(raw, p)
		if err != nil {
			return err
		}
		s.APITypePerType = make(map[string]APIType, len(m))
		for _, typeURL := range m.sortedKeys() {
			kp := mapKey(p, typeURL)
			name, err := asString(m[typeURL], kp)
			if err != nil {
				return err
			}
			t, ok := parseAPIType(name)
			if !ok {
				return fieldErrorf(kp, "unknown value %q (want one of %s)", name, apiTypeList())
			}
			s.APITypePerType[typeURL] = t
		}
	}
	if raw, ok := o.get("resource_files"); ok {
		p := member(path, "resource_files")
		m, err := asObject(raw, p)
		if err != nil {
			return err
		}
		s.ResourceFiles = make(map[string]string, len(m))
		for _, typeURL := range m.sortedKeys() {
			if s.ResourceFiles[typeURL], err = asString(m[typeURL], mapKey(p, typeURL)); err != nil {
				return err
			}
		}
	}
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{{"refresh_delay", &s.RefreshDelay}, {"request_timeout", &s.RequestTimeout}} {
		raw, ok := o.get(f.key)
		if !ok {
			continue
		}
		p := member(path, f.key)
		str, err := asString(raw, p)
		if err != nil {
			return err
		}
		d := &durationpb.Duration{}
		if protojson.Unmarshal(raw, d) != nil {
			return fieldErrorf(p, `invalid duration %q (want a string such as "1s")`, str)
		}
		*f.dst = d.AsDuration()
	}
	return nil
}

// validateSource checks the settings that depend on the API type.
func (s ServerConfig) validateSource(path string) error {
	switch {
	case s.RefreshDelay < 0:
		return fieldErrorf(member(path, "refresh_delay"), "must not be negative, got %s", s.RefreshDelay)
	case s.RequestTimeout < 0:
		return fieldErrorf(member(path, "request_timeout"), "must not be negative, got %s", s.RequestTimeout)
	case s.RefreshDelay != 0 && s.APIType.IsGRPC():
		return fieldErrorf(member(path, "refresh_delay"), "applies only to REST and FILESYSTEM servers, not %s", s.APIType)
	case s.RequestTimeout != 0 && s.APIType != APITypeREST:
		return fieldErrorf(member(path, "request_timeout"), "applies only to REST servers, not %s", s.APIType)
	case len(s.ResourceFiles) > 0 && s.APIType != APITypeFilesystem:
		return fieldErrorf(member(path, "resource_files"), "applies only to FILESYSTEM servers, not %s", s.APIType)
	case len(s.APITypePerType) > 0 && !s.APIType.IsGRPC():
		return fieldErrorf(member(path, "api_type_per_type"), "applies only to gRPC servers, not %s", s.APIType)
	}
	for _, typeURL := range slices.Sorted(maps.Keys(s.APITypePerType)) {
		p := mapKey(member(path, "api_type_per_type"), typeURL)
		if err := checkTypeURL(typeURL, p); err != nil {
			return err
		}
		if t := s.APITypePerType[typeURL]; !t.IsGRPC() {
			return fieldErrorf(p, "%s cannot be mixed with gRPC (want %s, %s, %s or %s)", t,
				APITypeAggregatedGRPC, APITypeAggregatedDeltaGRPC, APITypeGRPC, APITypeDeltaGRPC)
		}
	}
	switch s.APIType {
	case APITypeREST:
		u, err := url.Parse(s.ServerURI)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fieldErrorf(member(path, "server_uri"), "%q is not an http:// or https:// URL, which REST needs", s.ServerURI)
		}
		if i := s.selectedCreds(); i >= 0 {
			want := "https"
			if s.ChannelCreds[i].Type == CredsInsecure {
				want = "http"
			}
			if u.Scheme != want {
				return fieldErrorf(member(path, "server_uri"), "%q: %q channel_creds need an %s:// URL", s.ServerURI, s.ChannelCreds[i].Type, want)
			}
		}
	case APITypeFilesystem:
		p := member(path, "resource_files")
		if len(s.ResourceFiles) == 0 {
			return fieldErrorf(p, "must name at least one file for a FILESYSTEM server")
		}
		if strings.HasPrefix(s.ServerURI, "file://") && !filepath.IsAbs(s.FileDir()) {
			return fieldErrorf(member(path, "server_uri"), "%q: a file:// URI must hold an absolute path (or write a plain path)", s.ServerURI)
		}
		for _, typeURL := range slices.Sorted(maps.Keys(s.ResourceFiles)) {
			kp := mapKey(p, typeURL)
			if err := checkTypeURL(typeURL, kp); err != nil {
				return err
			}
			if s.ResourceFiles[typeURL] == "" {
				return fieldErrorf(kp, "must not be empty")
			}
		}
	}
	return nil
}

// checkTypeURL checks the shape of a type URL used as a map key: a host part
// and a message name, as in "type.googleapis.com/envoy.config.listener.v3.Listener".
func checkTypeURL(typeURL, path string) error {
	host, name, ok := strings.Cut(typeURL, "/")
	if !ok || host == "" || name == "" || strings.ContainsAny(name, "/ ") {
		return fieldErrorf(path, "%q is not a type URL such as %q", typeURL, "type.googleapis.com/envoy.config.listener.v3.Listener")
	}
	return nil
}

// sourceKey is the part of Key for the API type settings.
func (s ServerConfig) sourceKey() []string {
	var parts []string
	for _, typeURL := range slices.Sorted(maps.Keys(s.APITypePerType)) {
		parts = append(parts, strconv.Quote(typeURL)+"="+s.APITypePerType[typeURL].String())
	}
	out := []string{"[" + strings.Join(parts, ",") + "]"}
	parts = parts[:0]
	for _, typeURL := range slices.Sorted(maps.Keys(s.ResourceFiles)) {
		parts = append(parts, strconv.Quote(typeURL)+"="+strconv.Quote(s.ResourceFiles[typeURL]))
	}
	out = append(out, "["+strings.Join(parts, ",")+"]")
	return append(out, s.RefreshDelay.String(), s.RequestTimeout.String())
}

// resolveFilesystemDirs makes the relative directory of every FILESYSTEM
// server relative to base instead of the working directory.
func (c *Config) resolveFilesystemDirs(base string) {
	fix := func(servers []ServerConfig) {
		for i := range servers {
			s := &servers[i]
			if s.APIType == APITypeFilesystem && !strings.HasPrefix(s.ServerURI, "file://") && !filepath.IsAbs(s.ServerURI) {
				s.ServerURI = filepath.Join(base, s.ServerURI)
			}
		}
	}
	fix(c.Servers)
	for _, a := range c.Authorities {
		fix(a.Servers)
	}
}

// describeSource adds the API type settings to String.
func (s ServerConfig) describeSource() string {
	var b strings.Builder
	if len(s.APITypePerType) > 0 {
		var parts []string
		for _, typeURL := range slices.Sorted(maps.Keys(s.APITypePerType)) {
			parts = append(parts, shortType(typeURL)+"="+s.APITypePerType[typeURL].String())
		}
		fmt.Fprintf(&b, " per_type=%s", strings.Join(parts, ","))
	}
	if len(s.ResourceFiles) > 0 {
		fmt.Fprintf(&b, " files=%d", len(s.ResourceFiles))
	}
	return b.String()
}

func shortType(typeURL string) string {
	if i := strings.LastIndexAny(typeURL, "./"); i >= 0 {
		return typeURL[i+1:]
	}
	return typeURL
}
