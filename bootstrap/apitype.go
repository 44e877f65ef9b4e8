package bootstrap

import (
	"strconv"
	"strings"
)

// APIType is the protocol the client speaks to a management server, named as
// in Envoy's ApiConfigSource.ApiType. The zero value is APITypeAggregatedGRPC.
//
// In JSON it is the goxds extension field api_type of a server, written as the
// String form of the value.
type APIType int

// The API types: the four gRPC variants of the xDS protocol (SotW or delta,
// aggregated or one stream per type), REST-JSON polling, and files on disk.
const (
	// APITypeAggregatedGRPC is state-of-the-world ADS, the default: one
	// gRPC stream of DiscoveryRequest and DiscoveryResponse for all types.
	APITypeAggregatedGRPC APIType = iota
	// APITypeAggregatedDeltaGRPC is incremental ADS: one gRPC stream of
	// DeltaDiscoveryRequest and DeltaDiscoveryResponse for all types.
	APITypeAggregatedDeltaGRPC
	// APITypeGRPC is state of the world on one stream per type:
	// ListenerDiscoveryService.StreamListeners, ClusterDiscoveryService.
	// StreamClusters and so on, each stream with its own version, nonce and
	// reconnection.
	APITypeGRPC
	// APITypeDeltaGRPC is incremental on one stream per type
	// (DeltaListeners, DeltaClusters, ...).
	APITypeDeltaGRPC
	// APITypeREST is REST-JSON polling: POST /v3/discovery:<type> with a
	// DiscoveryRequest in the proto3 JSON mapping, one outstanding request
	// per type, long polls welcome. ServerURI is the base URL.
	APITypeREST
	// APITypeFilesystem reads each type from a file holding a
	// DiscoveryResponse (binary proto, JSON, YAML or proto text), and reads
	// it again whenever it changes. ServerURI is a directory; ResourceFiles
	// names the files. It is a goxds name: Envoy configures files with a
	// path_config_source rather than an ApiType.
	APITypeFilesystem
)

var apiTypeNames = [...]string{
	APITypeAggregatedGRPC:      "AGGREGATED_GRPC",
	APITypeAggregatedDeltaGRPC: "AGGREGATED_DELTA_GRPC",
	APITypeGRPC:                "GRPC",
	APITypeDeltaGRPC:           "DELTA_GRPC",
	APITypeREST:                "REST",
	APITypeFilesystem:          "FILESYSTEM",
}

// String returns the name used in JSON, such as "AGGREGATED_DELTA_GRPC", or
// "APIType(n)" for a value outside the constants.
func (t APIType) String() string {
	if t.known() {
		return apiTypeNames[t]
	}
	return "APIType(" + strconv.Itoa(int(t)) + ")"
}

func (t APIType) known() bool {
	return t >= 0 && int(t) < len(apiTypeNames)
}

// IsDelta reports whether t is one of the incremental (delta) variants.
func (t APIType) IsDelta() bool {
	return t == APITypeAggregatedDeltaGRPC || t == APITypeDeltaGRPC
}

// IsGRPC reports whether t is one of the four gRPC variants, whose
// ServerURI is a gRPC target.
func (t APIType) IsGRPC() bool {
	return t == APITypeAggregatedGRPC || t == APITypeAggregatedDeltaGRPC || t == APITypeGRPC || t == APITypeDeltaGRPC
}

// parseAPIType maps a JSON name to its APIType. Names are matched exactly, as
// protobuf's JSON mapping matches enum names.
func parseAPIType(name string) (APIType, bool) {
	for i, n := range apiTypeNames {
		if n == name {
			return APIType(i), true
		}
	}
	return 0, false
}

// apiTypeList is the list of accepted names, for error messages.
func apiTypeList() string {
	return strings.Join(apiTypeNames[:], ", ")
}
