// Package grpccsds serves one Client Status Discovery Service for a program
// that runs both grpc-go's xDS clients (google.golang.org/grpc/xds) and
// goxds's, so that a CSDS tool sees them all.
//
// A gRPC server takes one CSDS service only, and grpc-go's admin.Register
// adds grpc-go's own whenever google.golang.org/grpc/xds is linked; a
// second registration of the service ends the process. [RegisterAdmin]
// takes the place of admin.Register:
//
//	s := grpc.NewServer()
//	cleanup, err := grpccsds.RegisterAdmin(s, xdsClient) // not admin.Register(s)
//	if err != nil {
//		return err
//	}
//	defer cleanup()
//
// This package is apart from [github.com/goxds/xds/client/csds] because it
// imports grpc-go's CSDS, and with it grpc-go's xDS client: a program that
// uses only goxds does not need them.
package grpccsds

import (
	"fmt"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	channelzservice "google.golang.org/grpc/channelz/service"
	grpcgocsds "google.golang.org/grpc/xds/csds"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/client/csds"
)

// channelzService is the full name of grpc-go's channelz service.
const channelzService = "grpc.channelz.v1.Channelz"

// Register serves, on s, one CSDS service that reports grpc-go's xDS
// clients first and then the given goxds clients. If s already has a CSDS
// service it registers nothing and returns an error matching
// csds.ErrAlreadyRegistered. cleanup releases grpc-go's CSDS server; call
// it once s has stopped.
func Register(s *grpc.Server, clients ...*client.Client) (cleanup func(), err error) {
	if csds.Registered(s) {
		return nil, fmt.Errorf("grpccsds: %w; register one CSDS service per server", csds.ErrAlreadyRegistered)
	}
	inner, err := grpcgocsds.NewClientStatusDiscoveryServer()
	if err != nil {
		return nil, fmt.Errorf("grpccsds: grpc-go's CSDS server: %w", err)
	}
	statusv3.RegisterClientStatusDiscoveryServiceServer(s, csds.NewServer(inner, clients...))
	return inner.Close, nil
}

// RegisterAdmin registers what grpc-go's admin.Register does as of grpc-go
// 1.85, channelz and CSDS, with Register's CSDS service in place of
// grpc-go's. Channelz is left as it is if s already has it. A CSDS service
// already on s is an error, as for Register.
func RegisterAdmin(s *grpc.Server, clients ...*client.Client) (cleanup func(), err error) {
	// CSDS first: if it fails, nothing is registered.
	cleanup, err = Register(s, clients...)
	if err != nil {
		return nil, err
	}
	if _, ok := s.GetServiceInfo()[channelzService]; !ok {
		channelzservice.RegisterChannelzServiceToServer(s)
	}
	return cleanup, nil
}
