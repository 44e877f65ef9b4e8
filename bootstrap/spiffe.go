package bootstrap

import (
	"encoding/json"
	"path/filepath"
	"time"

	"google.golang.org/grpc/credentials/tls/certprovider"
	"google.golang.org/grpc/credentials/tls/certprovider/pemfile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fileWatcherPlugin is the certificate provider plugin of gRFC A29 that
// reads PEM files (grpc-go's pemfile).
const fileWatcherPlugin = "file_watcher"

// spiffeStoreName names, in certprovider's store of running providers, the
// file_watcher providers built here. grpc-go's own builder keys its
// providers by "file_watcher" and a string of its options; a name of our
// own keeps the two from ever being taken for each other.
const spiffeStoreName = "goxds/file_watcher+spiffe"

// fileWatcherWithSPIFFE handles a file_watcher config that names a SPIFFE
// trust bundle map (gRFC A87). grpc-go's pemfile builder reads
// spiffe_trust_bundle_map_file only when GRPC_EXPERIMENTAL_XDS_MTLS_SPIFFE
// is set; goxds always honours it, so such a config is parsed here and
// built with pemfile.NewProvider, which supports the map whatever the
// environment says. ok is false when the config names no map: grpc-go's
// builder then handles it as before.
//
// When the map is named, the provider's roots are the map, and
// ca_certificate_file is ignored, as the gRFC says (it lets one bootstrap
// serve gRPC versions with and without SPIFFE support).
func fileWatcherWithSPIFFE(raw json.RawMessage, path string) (bc *certprovider.BuildableConfig, ok bool, err error) {
	o, err := asObject(raw, "")
	if err != nil {
		return nil, false, nil // grpc-go's parser says what is wrong
	}
	var opts pemfile.Options
	if opts.SPIFFEBundleMapFile, err = o.str("spiffe_trust_bundle_map_file", member(path, "spiffe_trust_bundle_map_file")); err != nil {
		return nil, true, err
	}
	if opts.SPIFFEBundleMapFile == "" {
		return nil, false, nil
	}
	if err := o.strs(path, []stringField{
		{"certificate_file", &opts.CertFile},
		{"private_key_file", &opts.KeyFile},
		{"ca_certificate_file", &opts.RootFile},
	}); err != nil {
		return nil, true, err
	}
	opts.RefreshDuration = 10 * time.Minute // file_watcher's default
	if raw, ok := o.get("refresh_interval"); ok {
		p := member(path, "refresh_interval")
		s, err := asString(raw, p)
		if err != nil {
			return nil, true, err
		}
		d := &durationpb.Duration{}
		if protojson.Unmarshal(raw, d) != nil {
			return nil, true, fieldErrorf(p, `invalid duration %q (want a string such as "600s")`, s)
		}
		switch d := d.AsDuration(); {
		case d < 0:
			return nil, true, fieldErrorf(p, "must not be negative, got %s", s)
		case d > 0: // zero: the default, as for grpc-go's file_watcher
			opts.RefreshDuration = d
		}
	}
	// The rules of grpc-go's file_watcher, which pemfile.NewProvider
	// checks again: a certificate and its key together, in one directory
	// (C-core reads the pair atomically only then).
	switch {
	case opts.CertFile != "" && opts.KeyFile == "":
		return nil, true, fieldErrorf(member(path, "private_key_file"), "must be set when certificate_file is set")
	case opts.CertFile == "" && opts.KeyFile != "":
		return nil, true, fieldErrorf(member(path, "certificate_file"), "must be set when private_key_file is set")
	case opts.CertFile != "" && filepath.Dir(opts.CertFile) != filepath.Dir(opts.KeyFile):
		return nil, true, fieldErrorf(member(path, "private_key_file"), "must be in the directory of certificate_file")
	}
	start := func(certprovider.BuildOptions) certprovider.Provider {
		p, err := pemfile.NewProvider(opts)
		if err != nil {
			return nil // checked above; certprovider reports a nil provider as a failed build
		}
		return p
	}
	return certprovider.NewBuildableConfig(spiffeStoreName, compact(raw), start), true, nil
}
