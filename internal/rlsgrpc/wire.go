package rlsgrpc

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/goxds/xds/dataplane/rls"
)

// The lookup messages' Go types are internal to grpc-go, so the package
// encodes RouteLookupRequest and decodes RouteLookupResponse itself
// (grpc.lookup.v1, rls.proto), and hands grpc-go their bytes through
// rawCodec.

// Field numbers of grpc.lookup.v1 (rls.proto).
const (
	requestTargetType      = 3
	requestKeyMap          = 4
	requestReason          = 5
	requestStaleHeaderData = 6

	responseHeaderData = 2
	responseTargets    = 3
)

// marshalRequest encodes req; the key map in key order, so that the
// bytes are the same for the same request.
func marshalRequest(req *rls.LookupRequest) []byte {
	var b []byte
	if req.TargetType != "" {
		b = appendString(b, requestTargetType, req.TargetType)
	}
	keys := make([]string, 0, len(req.KeyMap))
	for k := range req.KeyMap {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e := appendString(appendString(nil, 1, k), 2, req.KeyMap[k])
		b = protowire.AppendTag(b, requestKeyMap, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	if req.Reason != 0 {
		b = protowire.AppendTag(b, requestReason, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(req.Reason))
	}
	if req.StaleHeaderData != "" {
		b = appendString(b, requestStaleHeaderData, req.StaleHeaderData)
	}
	return b
}

// unmarshalResponse decodes a RouteLookupResponse, as the protobuf
// runtime would: unknown fields and fields of another wire type are
// skipped; strings must be UTF-8.
func unmarshalResponse(b []byte) (*rls.LookupResponse, error) {
	resp := new(rls.LookupResponse)
	for off := 0; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("RouteLookupResponse: malformed protobuf at byte %d: %v", off, protowire.ParseError(n))
		}
		b, off = b[n:], off+n
		if typ != protowire.BytesType || (num != responseHeaderData && num != responseTargets) {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, fmt.Errorf("RouteLookupResponse: malformed protobuf at byte %d: %v", off, protowire.ParseError(n))
			}
			b, off = b[n:], off+n
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, fmt.Errorf("RouteLookupResponse: malformed protobuf at byte %d: %v", off, protowire.ParseError(n))
		}
		if !utf8.Valid(v) {
			return nil, fmt.Errorf("RouteLookupResponse: field %d at byte %d is not valid UTF-8", num, off)
		}
		if num == responseTargets {
			resp.Targets = append(resp.Targets, string(v))
		} else {
			resp.HeaderData = string(v)
		}
		b, off = b[n:], off+n
	}
	return resp, nil
}

// rawCodec hands grpc-go messages already encoded: it marshals a *[]byte
// and unmarshals into one. Its name is "proto", the content subtype of
// the messages it carries.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rlsgrpc: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rlsgrpc: cannot unmarshal into %T", v)
	}
	*b = data.Materialize() // a copy: data is freed on return
	return nil
}

func (rawCodec) Name() string { return "proto" }

// appendString appends a string field.
func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}
