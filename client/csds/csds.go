// Package csds exposes what goxds clients know as the Client Status
// Discovery Service (envoy.service.status.v3), so existing CSDS tools
// (grpcdebug, istioctl-style dumps) can read a Go service's xDS state.
//
// [ClientConfig] turns a client's status dump into the CSDS message;
// [Register] serves it on a gRPC server:
//
//	s := grpc.NewServer()
//	csds.Register(s, xdsClient)
package csds

import (
	"context"
	"errors"
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
// (gRFC A88). The CSDS message has no field for the control plane
// identifier (client.ResourceStatus.ControlPlane); it is left out.
func ClientConfig(c *client.Client, opts Options) *statusv3.ClientConfig {
	dump := c.Dump()
	cfg := &statusv3.ClientConfig{
		Node:              c.Node(),
		GenericXdsConfigs: make([]*statusv3.ClientConfig_GenericXdsConfig, 0, len(dump)),
	}
	for _, st := range dump {
		g := &statusv3.ClientConfig_GenericXdsConfig{
			TypeUrl:      st.TypeURL,
			Name:         st.Name,
			VersionInfo:  st.Version,
			ClientStatus: clientStatus(st.Status),
		}
		if !st.LastUpdated.IsZero() {
			g.LastUpdated = timestamppb.New(st.LastUpdated)
		}
		if !opts.ExcludeResourceContents {
			g.XdsConfig = st.Value
		}
		// error_state says why the resource is not as the server last
		// meant it: a rejected version (with that version and, unless
		// excluded, its bytes), an error the server reported, or a
		// timeout. A resource that does not exist has no error state:
		// its client_status says it all.
		switch st.Status {
		case client.StatusNACKed, client.StatusReceivedError, client.StatusTimeout:
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

// Register serves CSDS for the given clients on s. A request's
// node_matchers are not applied: every client's config is returned, each
// with its node, as gRPC's own CSDS service does.
func Register(s grpc.ServiceRegistrar, clients ...*client.Client) {
	statusv3.RegisterClientStatusDiscoveryServiceServer(s, &service{clients: clients})
}

type service struct {
	statusv3.UnimplementedClientStatusDiscoveryServiceServer
	clients []*client.Client
}

func (s *service) response(req *statusv3.ClientStatusRequest) *statusv3.ClientStatusResponse {
	opts := Options{ExcludeResourceContents: req.GetExcludeResourceContents()}
	resp := &statusv3.ClientStatusResponse{}
	for _, c := range s.clients {
		resp.Config = append(resp.Config, ClientConfig(c, opts))
	}
	return resp
}

// FetchClientStatus implements the unary CSDS method.
func (s *service) FetchClientStatus(_ context.Context, req *statusv3.ClientStatusRequest) (*statusv3.ClientStatusResponse, error) {
	return s.response(req), nil
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
		if err := stream.Send(s.response(req)); err != nil {
			return err
		}
	}
}
