package rls

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The route lookup config arrives as a serialized
// grpc.lookup.v1.RouteLookupClusterSpecifier, whose Go type lives in an
// internal package of grpc-go. The package decodes the few messages it
// needs from the wire format itself, so that it owns its parser and
// links no grpc-go; it decodes as the protobuf runtime would: unknown
// fields, and known fields of another wire type, are skipped; a repeated
// message field merges into a list; a later singular field wins.

// Field numbers of grpc.lookup.v1 (rls_config.proto).
const (
	specifierRouteLookupConfig = 1 // RouteLookupClusterSpecifier

	configGrpcKeyBuilders      = 2 // RouteLookupConfig (1 is http_keybuilders, unused by gRPC)
	configLookupService        = 3
	configLookupServiceTimeout = 4
	configMaxAge               = 5
	configStaleAge             = 6
	configCacheSizeBytes       = 7
	configDefaultTarget        = 9

	builderNames        = 1 // GrpcKeyBuilder
	builderHeaders      = 2
	builderExtraKeys    = 3
	builderConstantKeys = 4

	nameService = 1 // GrpcKeyBuilder.Name
	nameMethod  = 2

	matcherKey           = 1 // NameMatcher
	matcherNames         = 2
	matcherRequiredMatch = 3

	extraHost    = 1 // GrpcKeyBuilder.ExtraKeys
	extraService = 2
	extraMethod  = 3

	mapKey   = 1 // a map entry
	mapValue = 2

	durationSeconds = 1 // google.protobuf.Duration
	durationNanos   = 2
)

// ParseClusterSpecifier parses and validates a serialized
// grpc.lookup.v1.RouteLookupClusterSpecifier (the typed_config of an RLS
// cluster specifier plugin, gRFC A28): its route_lookup_config, with
// gRPC's checks and defaults. An unset route_lookup_config is an empty
// one, which is invalid (it has no key builders), as gRPC finds it.
func ParseClusterSpecifier(b []byte) (*Config, error) {
	var rlc []byte
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == specifierRouteLookupConfig && typ == protowire.BytesType {
			// A message field seen twice merges; concatenating the
			// encodings is that merge.
			rlc = append(rlc, v...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("RouteLookupClusterSpecifier: %w", err)
	}
	var rc rawConfig
	if err := rc.decode(rlc); err != nil {
		return nil, fmt.Errorf("route_lookup_config: %w", err)
	}
	cfg, err := rc.validate()
	if err != nil {
		return nil, fmt.Errorf("route_lookup_config: %w", err)
	}
	return cfg, nil
}

// decode reads a RouteLookupConfig.
func (rc *rawConfig) decode(b []byte) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		var err error
		switch {
		case num == configGrpcKeyBuilders && typ == protowire.BytesType:
			var kb rawKeyBuilder
			if err := kb.decode(v); err != nil {
				return fmt.Errorf("grpc_keybuilders[%d]: %w", len(rc.keyBuilders), err)
			}
			rc.keyBuilders = append(rc.keyBuilders, kb)
		case num == configLookupService && typ == protowire.BytesType:
			rc.lookupService, err = str(v, "lookup_service")
		case num == configLookupServiceTimeout && typ == protowire.BytesType:
			rc.lookupServiceTimeout, err = duration(v, "lookup_service_timeout")
		case num == configMaxAge && typ == protowire.BytesType:
			rc.maxAge, err = duration(v, "max_age")
			rc.maxAgeSet = rc.maxAge != 0
		case num == configStaleAge && typ == protowire.BytesType:
			rc.staleAge, err = duration(v, "stale_age")
			rc.staleAgeSet = rc.staleAge != 0
		case num == configCacheSizeBytes && typ == protowire.VarintType:
			rc.cacheSizeBytes = int64(n)
		case num == configDefaultTarget && typ == protowire.BytesType:
			rc.defaultTarget, err = str(v, "default_target")
		}
		return err
	})
}

// decode reads a GrpcKeyBuilder.
func (kb *rawKeyBuilder) decode(b []byte) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case builderNames:
			var n rawName
			err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				var err error
				switch {
				case num == nameService && typ == protowire.BytesType:
					n.service, err = str(v, "service")
				case num == nameMethod && typ == protowire.BytesType:
					n.method, err = str(v, "method")
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("names[%d]: %w", len(kb.names), err)
			}
			kb.names = append(kb.names, n)
		case builderHeaders:
			var m rawMatcher
			err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
				switch {
				case num == matcherKey && typ == protowire.BytesType:
					var err error
					m.key, err = str(v, "key")
					return err
				case num == matcherNames && typ == protowire.BytesType:
					name, err := str(v, "names")
					m.names = append(m.names, name)
					return err
				case num == matcherRequiredMatch && typ == protowire.VarintType:
					m.requiredMatch = n != 0
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("headers[%d]: %w", len(kb.headers), err)
			}
			kb.headers = append(kb.headers, m)
		case builderExtraKeys:
			err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if typ != protowire.BytesType {
					return nil
				}
				var err error
				switch num {
				case extraHost:
					kb.host, err = str(v, "host")
				case extraService:
					kb.service, err = str(v, "service")
				case extraMethod:
					kb.method, err = str(v, "method")
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("extra_keys: %w", err)
			}
		case builderConstantKeys:
			k, val, err := mapEntry(v)
			if err != nil {
				return fmt.Errorf("constant_keys: %w", err)
			}
			if kb.constantKeys == nil {
				kb.constantKeys = make(map[string]string)
			}
			kb.constantKeys[k] = val
		}
		return nil
	})
}

// mapEntry reads a map<string, string> entry.
func mapEntry(b []byte) (k, v string, err error) {
	err = eachField(b, func(num protowire.Number, typ protowire.Type, b []byte, _ uint64) error {
		var err error
		switch {
		case num == mapKey && typ == protowire.BytesType:
			k, err = str(b, "key")
		case num == mapValue && typ == protowire.BytesType:
			v, err = str(b, "value")
		}
		return err
	})
	return k, v, err
}

// str is a proto3 string field's value, which must be UTF-8.
func str(b []byte, field string) (string, error) {
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%s is not valid UTF-8", field)
	}
	return string(b), nil
}

// maxDurationSeconds is the range google.protobuf.Duration allows
// (10,000 years).
const maxDurationSeconds = 315576000000

// duration reads a google.protobuf.Duration, which must be in its range
// with seconds and nanos of one sign; it saturates at what a
// time.Duration holds.
func duration(b []byte, field string) (time.Duration, error) {
	var secs, nanos int64
	err := eachField(b, func(num protowire.Number, typ protowire.Type, _ []byte, n uint64) error {
		switch {
		case num == durationSeconds && typ == protowire.VarintType:
			secs = int64(n)
		case num == durationNanos && typ == protowire.VarintType:
			nanos = int64(int32(n))
		}
		return nil
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s: %w", field, err)
	case secs < -maxDurationSeconds || secs > maxDurationSeconds:
		return 0, fmt.Errorf("%s: %d seconds is out of range", field, secs)
	case nanos <= -1e9 || nanos >= 1e9:
		return 0, fmt.Errorf("%s: %d nanoseconds is out of range", field, nanos)
	case (secs > 0 && nanos < 0) || (secs < 0 && nanos > 0):
		return 0, fmt.Errorf("%s: seconds and nanos have different signs", field)
	}
	switch {
	case secs > int64(math.MaxInt64/time.Second):
		return math.MaxInt64, nil
	case secs < int64(math.MinInt64/time.Second):
		return math.MinInt64, nil
	}
	return time.Duration(secs)*time.Second + time.Duration(nanos), nil
}

// eachField calls f with each field of the message b: its number, wire
// type, and value (the bytes of a length-delimited field, the number of a
// varint or fixed one). Groups are skipped whole.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for off := 0; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return wireError(off, protowire.ParseError(n))
		}
		if num > protowire.MaxValidNumber || num < protowire.MinValidNumber {
			return wireError(off, errors.New("invalid field number"))
		}
		b, off = b[n:], off+n
		var v []byte
		var u uint64
		switch typ {
		case protowire.VarintType:
			u, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(b)
			u = uint64(x)
		case protowire.Fixed64Type:
			u, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return wireError(off, protowire.ParseError(n))
		}
		if err := f(num, typ, v, u); err != nil {
			return err
		}
		b, off = b[n:], off+n
	}
	return nil
}

// wireError says where the wire data stopped making sense.
func wireError(off int, err error) error {
	return fmt.Errorf("malformed protobuf at byte %d: %v", off, err)
}
