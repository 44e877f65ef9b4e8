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

// The API types. Only the two aggregated (ADS) ones are supported for now;
// Validate rejects the others, which are reserved for per-type streams and
// REST polling.
const (
	// APITypeAggregatedGRPC is state-of-the-world ADS, the default: one
	// gRPC stream of DiscoveryRequest and DiscoveryResponse for all types.
	APITypeAggregatedGRPC APIType = iota
	// APITypeAggregatedDeltaGRPC is incremental ADS: one gRPC stream of
	// DeltaDiscoveryRequest and DeltaDiscoveryResponse for all types.
	APITypeAggregatedDeltaGRPC
	// APITypeGRPC is state of the world on one stream per type. Reserved.
	APITypeGRPC
	// APITypeDeltaGRPC is incremental on one stream per type. Reserved.
	APITypeDeltaGRPC
	// APITypeREST is polling over REST. Reserved.
	APITypeREST
)

var apiTypeNames = [...]string{
	APITypeAggregatedGRPC:      "AGGREGATED_GRPC",
	APITypeAggregatedDeltaGRPC: "AGGREGATED_DELTA_GRPC",
	APITypeGRPC:                "GRPC",
	APITypeDeltaGRPC:           "DELTA_GRPC",
	APITypeREST:                "REST",
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

// supported reports whether goxds can speak t today.
func (t APIType) supported() bool {
	return t == APITypeAggregatedGRPC || t == APITypeAggregatedDeltaGRPC
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
