// Package csds exposes what goxds clients know as the Client Status
// Discovery Service (envoy.service.status.v3), so existing CSDS tools
// (grpcdebug, istioctl-style dumps) can read a Go service's xDS state.
//
// [ClientConfig] turns a client's status dump into the CSDS message;
// [Register] serves it on a gRPC server:
//
//	s := grpc.NewServer()
//	if err := csds.Register(s, xdsClient); err != nil {
//		return err
//	}
//
// # With grpc-go's admin services
//
// A gRPC server has room for one CSDS service. grpc-go's admin.Register
// (google.golang.org/grpc/admin) registers grpc-go's own as soon as the
// program links google.golang.org/grpc/xds, and grpc-go ends the process
// if a second registration of the service follows. So:
//
//   - A program that does not link google.golang.org/grpc/xds calls
//     admin.Register (channelz) and Register, in either order.
//   - A program that links it (it uses grpc-go's xDS too) and wants both
//     stacks reported calls [github.com/goxds/xds/client/csds/grpccsds.RegisterAdmin]
//     instead of admin.Register: channelz, and one CSDS service that
//     reports grpc-go's xDS clients and goxds's. That package is separate
//     so that this one does not pull in grpc-go's xDS stack.
//   - Register after admin.Register returns an error instead of dying
//     ([ErrAlreadyRegistered]); admin.Register after Register cannot be
//     helped from here: grpc-go's registration fails fatally.
package csds

import (
	"context"
	"errors"
	"fmt"
	"io"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/goxds/xds/client"
)

// Options tune ClientConfig.
type Options struct {
	// ExcludeResourceContents leaves the resources' bytes out, as the CSDS
	// request field exclude_resource_contents asks.
	ExcludeResourceContents bool
}

// ClientConfig returns the state of every resource c holds: its status
// (REQUESTED, DOES_NOT_EXIST, ACKED, NACKED, RECEIVED_ERROR, TIMEOUT),
// version, value, last update, and in error_state the error: for rejected
// ones with the rejected version, for RECEIVED_ERROR the server's error
// (gRFC A88), for REQUESTED ones why they have not come, if something
// stands in the way (the server unreachable, a resource file missing). The CSDS message has no field for the control plane
// identifier (client.ResourceStatus.ControlPlane); it is left out. Nor has
// it one for a subscription's dynamic parameters: a resource watched with
// some is named with them appended, name{k1="v1", k2="v2"}
// (client.ResourceStatus.NameWithParameters), one config per parameter set.
func ClientConfig(c *client.Client, opts Options) *statusv3.ClientConfig {
	dump := c.Dump()
	cfg := &statusv3.ClientConfig{
		Node:              c.Node(),
		GenericXdsConfigs: make([]*statusv3.ClientConfig_GenericXdsConfig, 0, len(dump)),
	}
	for _, st := range dump {
		g := &statusv3.ClientConfig_GenericXdsConfig{
			TypeUrl:      st.TypeURL,
			Name:         st.NameWithParameters(),
			VersionInfo:  st.Version,
			ClientStatus: clientStatus(st.Status),
		}
		if !st.LastUpdated.IsZero() {
			g.LastUpdated = timestamppb.New(st.LastUpdated)
		}
		// A value served from disk (client.Options.Persist, st.FromDisk)
		// is REQUESTED with its xds_config: no server has sent it since
		// the client started, which is what REQUESTED says, and CSDS has
		// no status for "held from an earlier run". ACKED would claim an
		// answer no server gave; the config shows what is in force.
		if !opts.ExcludeResourceContents {
			g.XdsConfig = st.Value
		}
		// error_state says why the resource is not as the server last
		// meant it: a rejected version (with that version and, unless
		// excluded, its bytes), an error the server reported, or a
		// timeout; for one still REQUESTED, why it has not come (its
		// server unreachable, its file missing): a tool that shows only
		// REQUESTED leaves its reader guessing while every RPC fails. A
		// resource that does not exist has no error state: its
		// client_status says it all.
		switch st.Status {
		case client.StatusNACKed, client.StatusReceivedError, client.StatusTimeout, client.StatusRequested:
			if st.Err == nil {
				break
			}
			g.ErrorState = &adminv3.UpdateFailureState{Details: st.Err.Error()}
			if !st.LastUpdated.IsZero() {
				g.ErrorState.LastUpdateAttempt = timestamppb.New(st.LastUpdated)
			}
			if st.Status == client.StatusNACKed {
				g.ErrorState.VersionInfo = st.RejectedVersion
				if !opts.ExcludeResourceContents {
					g.ErrorState.FailedConfiguration = st.Rejected
				}
			}
		}
		cfg.GenericXdsConfigs = append(cfg.GenericXdsConfigs, g)
	}
	return cfg
}

func clientStatus(s client.Status) adminv3.ClientResourceStatus {
	switch s {
	case client.StatusRequested:
		return adminv3.ClientResourceStatus_REQUESTED
	case client.StatusDoesNotExist:
		return adminv3.ClientResourceStatus_DOES_NOT_EXIST
	case client.StatusACKed:
		return adminv3.ClientResourceStatus_ACKED
	case client.StatusNACKed:
		return adminv3.ClientResourceStatus_NACKED
	case client.StatusReceivedError:
		return adminv3.ClientResourceStatus_RECEIVED_ERROR
	case client.StatusTimeout:
		return adminv3.ClientResourceStatus_TIMEOUT
	}
	return adminv3.ClientResourceStatus_UNKNOWN
}

// ErrAlreadyRegistered is the error Register returns when the server
// already has a CSDS service, such as the one grpc-go's admin.Register adds.
var ErrAlreadyRegistered = errors.New("csds: the server already has a CSDS service (" + serviceName + ")")

// serviceName is the full name of the CSDS service, as in
// statusv3.ClientStatusDiscoveryService_ServiceDesc.
const serviceName = "envoy.service.status.v3.ClientStatusDiscoveryService"

// Register serves CSDS for the given clients on s. A request's
// node_matchers are not applied: every client's config is returned, each
// with its node, as gRPC's own CSDS service does.
//
// If s already has a CSDS service, Register returns an error that matches
// ErrAlreadyRegistered and registers nothing, where grpc would end the
// process; the package doc says how to serve goxds's clients alongside
// grpc-go's. Only a registrar that lists its services (GetServiceInfo, as
// *grpc.Server does) can be checked.
func Register(s grpc.ServiceRegistrar, clients ...*client.Client) error {
	if Registered(s) {
		return fmt.Errorf("%w; to serve grpc-go's xDS clients and goxds's from one service, call grpccsds.RegisterAdmin (package github.com/goxds/xds/client/csds/grpccsds) instead of admin.Register", ErrAlreadyRegistered)
	}
	statusv3.RegisterClientStatusDiscoveryServiceServer(s, NewServer(nil, clients...))
	return nil
}

// Registered reports whether s has a CSDS service. A registrar that does
// not list its services (no GetServiceInfo method) is reported as having
// none.
func Registered(s grpc.ServiceRegistrar) bool {
	lister, ok := s.(interface {
		GetServiceInfo() map[string]grpc.ServiceInfo
	})
	if !ok {
		return false
	}
	_, ok = lister.GetServiceInfo()[serviceName]
	return ok
}

// NewServer returns a CSDS service that reports the given clients, after
// those inner reports if inner is not nil: inner is another CSDS service,
// such as grpc-go's (google.golang.org/grpc/xds/csds), whose clients are
// to be reported too. An error of inner fails the request: a partial
// answer would read as a client that has no resources.
func NewServer(inner statusv3.ClientStatusDiscoveryServiceServer, clients ...*client.Client) statusv3.ClientStatusDiscoveryServiceServer {
	return &service{inner: inner, clients: clients}
}

type service struct {
	statusv3.UnimplementedClientStatusDiscoveryServiceServer
	inner   statusv3.ClientStatusDiscoveryServiceServer // nil: goxds's clients only
	clients []*client.Client
}

func (s *service) response(ctx context.Context, req *statusv3.ClientStatusRequest) (*statusv3.ClientStatusResponse, error) {
	resp := &statusv3.ClientStatusResponse{}
	if s.inner != nil {
		in, err := s.inner.FetchClientStatus(ctx, req)
		if err != nil {
			return nil, err
		}
		resp.Config = append(resp.Config, in.GetConfig()...)
	}
	opts := Options{ExcludeResourceContents: req.GetExcludeResourceContents()}
	for _, c := range s.clients {
		resp.Config = append(resp.Config, ClientConfig(c, opts))
	}
	return resp, nil
}

// FetchClientStatus implements the unary CSDS method.
func (s *service) FetchClientStatus(ctx context.Context, req *statusv3.ClientStatusRequest) (*statusv3.ClientStatusResponse, error) {
	return s.response(ctx, req)
}

// StreamClientStatus answers each request on the stream with the current
// state.
func (s *service) StreamClientStatus(stream grpc.BidiStreamingServer[statusv3.ClientStatusRequest, statusv3.ClientStatusResponse]) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := s.response(stream.Context(), req)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}
